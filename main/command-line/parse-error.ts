// A command line's own parse errors (node:util parseArgs), told as `canopy` and `canopy-server`
// tell their other usage errors: Node's wording names its own notation (`Option '--bucket
// <value>' argument missing`) and, for an unknown option, a sentence on positional arguments.
// An error this does not know is told in Node's words.

/** Whether `error` is one of parseArgs's own (ERR_PARSE_ARGS_*). */
export function isParseError(error: unknown): error is Error {
  return (
    error instanceof Error &&
    (error as { code?: unknown }).code?.toString().startsWith('ERR_PARSE_ARGS') === true
  );
}

/** What `error` (an ERR_PARSE_ARGS_* error of parseArgs) says, in our words. */
export function parseErrorMessage(error: Error): string {
  const { message } = error;
  const missing = /^Option '(?:-\w, )?--([\w-]+) <value>' argument missing/.exec(message);
  if (missing) return `--${missing[1] ?? ''} needs a value`;
  // The next word begins with a dash: most often the value was left out before another option.
  const ambiguous = /^Option '(?:-\w, )?--([\w-]+)' argument is ambiguous/.exec(message);
  if (ambiguous) {
    const option = `--${ambiguous[1] ?? ''}`;
    return `${option} needs a value (one that begins with - is written ${option}=-VALUE)`;
  }
  const valued = /^Option '(?:-\w, )?--([\w-]+)' does not take an argument/.exec(message);
  if (valued) return `--${valued[1] ?? ''} takes no value`;
  const unknown = /^Unknown option '([^']+)'/.exec(message);
  if (unknown)
    return `unknown option ${unknown[1] ?? ''} (a name that begins with - goes after a --)`;
  return message;
}
