import { UsageError } from './command-context.ts';

// The options each command takes. The command line is read once for all commands, so an option
// one command takes is known to every other, which would drop it without a word: `canopy
// verify --snapshot ID` verified the active version, and `canopy history PATH --version ID`
// would list every version when the user meant to ask about one. Refused with the usage status
// instead, before anything is loaded.

/** Every command takes these. */
const ANY_COMMAND = ['json', 'help'];

const TAKEN: ReadonlyMap<string, readonly string[]> = new Map([
  ['login', ['server', 'code', 'name', 'local', 'data']],
  ['link', ['server', 'name']],
  ['whoami', []],
  ['logout', []],
  ['devices', ['name']],
  ['account', ['display-name', 'locale']],
  ['invoices', []],
  ['notifications', []],
  ['buckets', ['type', 'class']],
  ['backup', ['bucket', 'dry-run', 'progress', 'allow-empty', 'replace-source', 'skip-check']],
  ['excludes', ['add', 'remove', 'clear']],
  ['versions', ['bucket']],
  ['snapshots', ['bucket']],
  ['ls', ['bucket', 'version', 'snapshot', 'at', 'recursive', 'progress']],
  ['restore', ['bucket', 'version', 'snapshot', 'at', 'to', 'overwrite', 'sparse', 'progress']],
  ['diff', ['bucket', 'from', 'to', 'progress']],
  ['history', ['bucket', 'progress']],
  ['verify', ['bucket', 'version', 'snapshot', 'at', 'all', 'progress']],
]);

/** Refuses an option given that command `name` does not take; an unknown command passes. */
export function refuseOptionsNotTaken(name: string, given: Iterable<string>): void {
  const taken = TAKEN.get(name);
  if (!taken) return;
  const refused = [...given].filter(
    (option) => !taken.includes(option) && !ANY_COMMAND.includes(option),
  );
  if (refused.length === 0) return;
  const named = refused.map((option) => `--${option}`).join(', ');
  throw new UsageError(
    `${name} does not take ${named}${taken.length === 0 ? '' : ` (it takes ${taken.map((option) => `--${option}`).join(', ')})`}`,
  );
}
