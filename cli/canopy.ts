import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { isEngineError } from '../main/api/index.ts';
import type { Engine } from '../main/index.ts';
import { progressPrinter } from './progress-printer.ts';
import { stateRepairNotice } from './state-repair-notice.ts';
import { localDatabaseNotice } from './local-database-notice.ts';
import { runOnWhenReaderGoes } from './closed-output.ts';
import { closeHungUpTerminalOnExit } from './terminal-hang-up.ts';
import { UsageError, unexpectedWords, type Command, type Output } from './command-context.ts';
import { jsonArrayInParts, linesInParts } from './listing-output.ts';
import { OPTIONS, refuseOptionsNotTaken } from './command-options.ts';
import { commandFailure, failureJson, failureText } from './command-failure.ts';
import { helpOf } from './usage-text.ts';

// `canopy`: the engine from the command line, for people and for our own tests.

// Commands, and the engine, are loaded once a command is named: `canopy --help`, and a word
// that names no command, answer in about 0.2 s instead of after the engine's modules (0.65-0.85
// s, npm run bench -- start).
const accountCommands = () => import('./commands/account-commands.ts');
const backupCommands = () => import('./commands/backup-commands.ts');
const versionCommands = () => import('./commands/version-commands.ts');
const restoreCommands = () => import('./commands/restore-commands.ts');

/** Each command's loader, by the word that names it (a Map: no word finds an Object method). */
const COMMANDS: ReadonlyMap<string, () => Promise<Command>> = new Map([
  ['login', async () => (await accountCommands()).loginCommand],
  ['link', async () => (await accountCommands()).linkCommand],
  ['whoami', async () => (await accountCommands()).whoamiCommand],
  ['logout', async () => (await accountCommands()).logoutCommand],
  ['devices', async () => (await accountCommands()).devicesCommand],
  ['account', async () => (await accountCommands()).accountCommand],
  ['invoices', async () => (await accountCommands()).invoicesCommand],
  ['notifications', async () => (await accountCommands()).notificationsCommand],
  ['buckets', async () => (await import('./commands/bucket-commands.ts')).bucketsCommand],
  ['backup', async () => (await backupCommands()).backupCommand],
  ['excludes', async () => (await backupCommands()).excludesCommand],
  ['versions', async () => (await versionCommands()).versionsCommand],
  ['snapshots', async () => (await versionCommands()).snapshotsCommand],
  ['ls', async () => (await restoreCommands()).lsCommand],
  ['restore', async () => (await restoreCommands()).restoreCommand],
  ['diff', async () => (await import('./commands/diff-command.ts')).diffCommand],
  ['history', async () => (await import('./commands/history-command.ts')).historyCommand],
  ['verify', async () => (await import('./commands/verify-command.ts')).verifyCommand],
]);

/** The command `name` names; a usage error, before anything is loaded, when none does. */
async function commandNamed(name: string | undefined): Promise<Command> {
  const load = name === undefined ? undefined : COMMANDS.get(name);
  if (!load)
    throw new UsageError(name === undefined ? 'a command is required' : `unknown command: ${name}`);
  return load();
}

/** Runs `command` with the words after its name; its exit status when not 0 without an error. */
async function run(
  engine: Engine,
  command: Command,
  words: readonly string[],
  values: Record<string, string | boolean | string[] | undefined>,
  out: Output,
): Promise<number | undefined> {
  const [sub, ...rest] = words;
  return command({
    engine,
    sub,
    rest,
    values,
    out,
    str: (option) => {
      const value = values[option];
      // Given as empty text, most often an empty shell variable (`--to "$TARGET"`): a restore
      // would have gone into the working folder, and the embedded service's data there too.
      if (value === '') throw new UsageError(`--${option} was given empty; it needs a value`);
      return typeof value === 'string' ? value : undefined;
    },
    strings: (option) => {
      const value = values[option];
      return Array.isArray(value) ? value : [];
    },
    progressShown: (view) =>
      progressPrinter(process.stderr.isTTY && !out.json, values['progress'] === true, view),
    takesWords: (count) => {
      if (words.length > count) throw unexpectedWords(words.slice(count));
    },
  });
}

export async function main(argv: readonly string[]): Promise<number> {
  runOnWhenReaderGoes(process.stdout);
  runOnWhenReaderGoes(process.stderr);
  closeHungUpTerminalOnExit();
  const out: Output = {
    json: argv.includes('--json'),
    print(human, data) {
      process.stdout.write(this.json ? `${JSON.stringify(data)}\n` : `${human}\n`);
    },
    printEach(lines, items) {
      for (const part of this.json ? jsonArrayInParts(items) : linesInParts(lines))
        process.stdout.write(part);
    },
    write(text) {
      process.stdout.write(text);
    },
  };
  let engine: Engine | undefined;
  /** The command named, once it names one. */
  let commandName: string | undefined;
  try {
    // `--version` alone asks for Canopy's; given with a command, it names a version of a bucket.
    if (argv.length === 1 && argv[0] === '--version') {
      const { packageVersion } = await import('../main/package-files/index.ts');
      process.stdout.write(`canopy ${packageVersion()}\n`);
      return 0;
    }
    const { values, positionals } = parseArgs({
      args: [...argv],
      allowPositionals: true,
      options: OPTIONS,
    });
    // No command: the help for a person, a usage failure for a script.
    if (values.help !== true && positionals.length === 0 && out.json)
      throw new UsageError('a command is required');
    if (values.help === true || positionals.length === 0) {
      process.stdout.write(`${helpOf(positionals[0])}\n`);
      return values.help === true ? 0 : 2;
    }
    const [name, ...words] = positionals;
    const command = await commandNamed(name);
    commandName = name;
    if (name !== undefined)
      refuseOptionsNotTaken(
        name,
        words[0],
        Object.keys(values).filter((option) => values[option as keyof typeof values] !== undefined),
      );
    const [
      { openSecretStore, secretStoreChoice },
      { createEngine },
      { canopyHome },
      { useProxyFromEnvironment },
    ] = await Promise.all([
      import('../main/identity/index.ts'),
      import('../main/index.ts'),
      import('../main/state/index.ts'),
      import('../main/service/index.ts'),
    ]);
    useProxyFromEnvironment();
    const home = canopyHome();
    const { store, warning } = await openSecretStore(
      home,
      secretStoreChoice(process.env['CANOPY_SECRET_STORE']),
    );
    const warned = path.join(home, '.secret-file-warning-shown');
    if (warning !== null && !existsSync(warned)) {
      process.stderr.write(`${warning}\n`);
      mkdirSync(home, { recursive: true, mode: 0o700 });
      writeFileSync(warned, `${new Date().toISOString()}\n`);
    }
    // A damaged state database shows in the request that reads a damaged page; the engine
    // opened again rebuilds it, and the command runs once more, on the rebuilt one.
    for (let attempt = 1; ; attempt += 1) {
      try {
        engine = createEngine({
          home,
          secrets: store,
          startLocalService: async (...args) => {
            // Loaded only when the home backs up to this computer: a device enrolled with a
            // server of its own starts without the service's modules (Fastify and its store).
            const { startLocalService } = await import('./local-service.ts');
            const service = await startLocalService(...args);
            if (service.restoredDatabase)
              process.stderr.write(`canopy: ${localDatabaseNotice(service.restoredDatabase)}\n`);
            return service;
          },
        });
        const repair = engine.stateRepair();
        if (repair)
          for (const line of stateRepairNotice(repair)) process.stderr.write(`canopy: ${line}\n`);
        return (await run(engine, command, words, values, out)) ?? 0;
      } catch (error) {
        if (attempt > 1) throw error;
        if (isEngineError(error, 'state_damaged'))
          process.stderr.write(
            `canopy: Canopy's state database was found damaged (${(error.cause as Error).message}); rebuilding it, then running the command again\n`,
          );
        else if (isEngineError(error, 'local_database_damaged'))
          process.stderr.write(
            'canopy: the database of the backups (service.sqlite) was found damaged on its disk; putting the copy Canopy keeps of it in its place, then running the command again\n',
          );
        else throw error;
        await engine?.close();
        engine = undefined;
      }
    }
  } catch (error) {
    const failure = commandFailure(error, argv, commandName);
    process.stderr.write(out.json ? failureJson(failure) : failureText(failure));
    return failure.status;
  } finally {
    await engine?.close();
  }
}
