// Text put into a command line the output suggests, quoted as a POSIX shell reads it back: a
// name with a space, a quote, a `$` or a newline is copied and pasted as that one name.

/** `text` as one shell word: as it is when nothing in it is special, else single-quoted. */
export function shellWord(text: string): string {
  if (/^[A-Za-z0-9_./,:@%+=-]+$/.test(text)) return text;
  return `'${text.replaceAll("'", `'\\''`)}'`;
}
