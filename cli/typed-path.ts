// A PATH word of `ls`, `restore`, `diff` and `history` as the engine takes it: with the folder
// it was typed in, so that a relative path the shell completed (`beach.jpg` in ~/Pictures/2019)
// names what it names there (main/engine/paths-in-versions.ts).

/** The folder this command runs in; undefined when it was deleted meanwhile. */
function workingFolder(): string | undefined {
  try {
    return process.cwd();
  } catch {
    // ENOENT, a working folder removed under the shell: a relative path then goes from the
    // version's top, as it does in any folder outside the one backed up.
    return undefined;
  }
}

export function typedPath(word: string): { path: string; typedIn?: string } {
  const typedIn = workingFolder();
  return { path: word, ...(typedIn === undefined ? {} : { typedIn }) };
}
