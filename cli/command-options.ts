import type { ParseArgsConfig } from 'node:util';
import { UsageError } from './command-context.ts';

// The options each command takes. The command line is read once for all commands, so an option
// one command takes is known to every other, which would drop it without a word: `canopy
// verify --snapshot ID` verified the active version, and `canopy history PATH --version ID`
// would list every version when the user meant to ask about one. Refused with the usage status
// instead, before anything is loaded.

/** Every option of any command, as the command line is read (node:util parseArgs). */
export const OPTIONS = {
  json: { type: 'boolean' },
  server: { type: 'string' },
  code: { type: 'string' },
  name: { type: 'string' },
  local: { type: 'boolean' },
  data: { type: 'string' },
  type: { type: 'string' },
  class: { type: 'string' },
  'display-name': { type: 'string' },
  locale: { type: 'string' },
  bucket: { type: 'string' },
  version: { type: 'string' },
  from: { type: 'string' },
  to: { type: 'string' },
  overwrite: { type: 'boolean' },
  'dry-run': { type: 'boolean' },
  yes: { type: 'boolean' },
  'keep-last': { type: 'string' },
  'keep-hourly': { type: 'string' },
  'keep-daily': { type: 'string' },
  'keep-weekly': { type: 'string' },
  'keep-monthly': { type: 'string' },
  'keep-yearly': { type: 'string' },
  'keep-within': { type: 'string' },
  'allow-empty': { type: 'boolean' },
  'replace-source': { type: 'boolean' },
  'skip-check': { type: 'boolean' },
  'limit-upload': { type: 'string' },
  'limit-download': { type: 'string' },
  add: { type: 'string', multiple: true },
  remove: { type: 'string', multiple: true },
  clear: { type: 'boolean' },
  progress: { type: 'boolean' },
  sparse: { type: 'boolean' },
  snapshot: { type: 'string' },
  at: { type: 'string' },
  all: { type: 'boolean' },
  recursive: { type: 'boolean', short: 'R' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies NonNullable<ParseArgsConfig['options']>;

/** Every command takes these. */
export const ANY_COMMAND = ['json', 'help'];

/**
 * The keep rules of `versions prune`, which `versions policy` sets for later backups: one per
 * RETENTION_RULES and --keep-within, written out since this file is read before the engine is
 * loaded (test/unit/cli/command-options.test.ts holds the two together).
 */
const KEEP_RULES = [
  'keep-last',
  'keep-hourly',
  'keep-daily',
  'keep-weekly',
  'keep-monthly',
  'keep-yearly',
  'keep-within',
];

/** The options each command takes besides ANY_COMMAND's, by the command's name. */
export const TAKEN: ReadonlyMap<string, readonly string[]> = new Map([
  ['login', ['server', 'code', 'name', 'local', 'data']],
  ['link', ['server', 'name']],
  ['whoami', []],
  ['logout', []],
  ['devices', ['name', 'yes']],
  ['account', ['display-name', 'locale']],
  ['invoices', []],
  ['notifications', []],
  ['buckets', ['type', 'class', 'yes']],
  [
    'backup',
    [
      'bucket',
      'dry-run',
      'progress',
      'allow-empty',
      'replace-source',
      'skip-check',
      'limit-upload',
    ],
  ],
  ['excludes', ['add', 'remove', 'clear']],
  ['versions', ['bucket', 'dry-run', 'clear', ...KEEP_RULES]],
  ['snapshots', ['bucket']],
  ['ls', ['bucket', 'version', 'snapshot', 'at', 'recursive', 'progress']],
  [
    'restore',
    [
      'bucket',
      'version',
      'snapshot',
      'at',
      'to',
      'overwrite',
      'sparse',
      'dry-run',
      'progress',
      'limit-download',
    ],
  ],
  ['diff', ['bucket', 'from', 'to', 'progress']],
  ['history', ['bucket', 'progress']],
  ['verify', ['bucket', 'version', 'snapshot', 'at', 'all', 'progress', 'limit-download']],
]);

/**
 * Options of a command that only some of its subcommands take, by command, then subcommand;
 * with the subcommand run when none is named. Given to another subcommand, one is refused as
 * any option the command does not take: `canopy buckets --type backup` listed every bucket, as
 * `canopy versions --keep-last 2` would have pruned nothing.
 */
export const TAKEN_BY_SUBCOMMAND: ReadonlyMap<
  string,
  { readonly unnamed: string; readonly by: Readonly<Record<string, readonly string[]>> }
> = new Map([
  ['buckets', { unnamed: 'list', by: { create: ['type', 'class'], delete: ['yes'] } }],
  ['devices', { unnamed: 'list', by: { approve: ['name'], revoke: ['yes'] } }],
  ['account', { unnamed: 'show', by: { set: ['display-name', 'locale'] } }],
  [
    'versions',
    {
      unnamed: 'list',
      by: { prune: ['dry-run', ...KEEP_RULES], policy: ['clear', ...KEEP_RULES] },
    },
  ],
]);

/**
 * Refuses an option given that command `name` does not take, or that its subcommand `sub` (the
 * word after it) does not (TAKEN_BY_SUBCOMMAND); an unknown command passes.
 */
export function refuseOptionsNotTaken(
  name: string,
  sub: string | undefined,
  given: Iterable<string>,
): void {
  const taken = TAKEN.get(name);
  if (!taken) return;
  const options = [...given];
  const refused = options.filter(
    (option) => !taken.includes(option) && !ANY_COMMAND.includes(option),
  );
  if (refused.length > 0) {
    const named = refused.map((option) => `--${option}`).join(', ');
    throw new UsageError(
      `${name} does not take ${named}${taken.length === 0 ? '' : ` (it takes ${taken.map((option) => `--${option}`).join(', ')})`}`,
    );
  }
  const subcommands = TAKEN_BY_SUBCOMMAND.get(name);
  if (!subcommands) return;
  const restricted = new Set(Object.values(subcommands.by).flat());
  const run = sub ?? subcommands.unnamed;
  const takenHere = subcommands.by[run] ?? [];
  const notHere = options.filter((option) => restricted.has(option) && !takenHere.includes(option));
  if (notHere.length === 0) return;
  const takers = Object.keys(subcommands.by).filter((other) =>
    notHere.every((option) => subcommands.by[other]?.includes(option)),
  );
  throw new UsageError(
    `${name} ${run} does not take ${notHere.map((option) => `--${option}`).join(', ')}${takers.length === 0 ? '' : ` (${takers.map((taker) => `${name} ${taker}`).join(' and ')} ${takers.length === 1 ? 'takes' : 'take'} ${notHere.length === 1 ? 'it' : 'them'})`}`,
  );
}
