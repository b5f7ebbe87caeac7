import { afterAll, describe, expect, it } from 'vitest';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loginWithBucket, runCanopy } from '../helpers/canopy-cli.ts';
import { writeSettled } from '../helpers/settled-file.ts';

// A word a command does not take is refused with the usage status, and nothing is done: left
// over, it was a request dropped without a word (`canopy restore a b` restored a alone, and
// `canopy buckets create My Photos` made a bucket named "My").

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-extra-words-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const env = { CANOPY_SECRET_STORE: 'file' };

describe('words a command does not take', () => {
  it('are refused with the usage status, naming them, before anything is done', async () => {
    const home = path.join(scratch, 'home');
    await loginWithBucket(home, path.join(scratch, 'local'), 'Docs');
    const source = path.join(scratch, 'source');
    writeSettled(path.join(source, 'a.txt'), 'a');
    writeSettled(path.join(source, 'b.txt'), 'b');

    const refused = async (args: string[], extra: string): Promise<void> => {
      const run = await runCanopy(home, args, env);
      expect(run.stderr).toBe(`canopy: ${extra} (a name with spaces goes in quotes)\n`);
      expect(run.status).toBe(2);
    };
    await refused(['buckets', 'create', 'My', 'Photos'], 'unexpected argument "Photos"');
    const buckets = await runCanopy(home, ['buckets', '--json'], env);
    expect((JSON.parse(buckets.stdout) as { name: string }[]).map((b) => b.name)).toEqual(['Docs']);
    await refused(
      ['backup', source, path.join(scratch, 'other'), '--bucket', 'Docs'],
      `unexpected argument ${JSON.stringify(path.join(scratch, 'other'))}`,
    );
    const versions = await runCanopy(home, ['versions', '--bucket', 'Docs', '--json'], env);
    expect(JSON.parse(versions.stdout)).toEqual([]);

    const backup = await runCanopy(home, ['backup', source, '--bucket', 'Docs'], env);
    expect(backup.status, backup.stderr).toBe(0);
    const target = path.join(scratch, 'target');
    await refused(
      ['restore', '--bucket', 'Docs', 'a.txt', 'b.txt', 'c.txt', '--to', target],
      'unexpected arguments "b.txt" "c.txt"',
    );
    expect(existsSync(target)).toBe(false);
    await refused(['verify', '--bucket', 'Docs', 'a.txt'], 'unexpected argument "a.txt"');
    await refused(['diff', '--bucket', 'Docs', 'a.txt', 'b.txt'], 'unexpected argument "b.txt"');
    await refused(['history', '--bucket', 'Docs', 'a.txt', 'b.txt'], 'unexpected argument "b.txt"');

    // Empty words, most often an empty shell variable: a restore `--to ""` went into the
    // working folder, and one of the path "" restored the whole version.
    const emptied = async (args: string[], told: string): Promise<void> => {
      const run = await runCanopy(home, args, env);
      expect(run.stderr).toBe(`canopy: ${told}\n`);
      expect(run.status).toBe(2);
    };
    await emptied(
      ['restore', '--bucket', 'Docs', '--to', ''],
      '--to was given empty; it needs a value',
    );
    await emptied(
      ['restore', '--bucket', 'Docs', '', '--to', target],
      'the path to restore was given empty; leave it out to restore the whole version',
    );
    expect(existsSync(target)).toBe(false);
    await emptied(['backup', source, '--bucket', ''], '--bucket was given empty; it needs a value');
    await emptied(['login', '--local', '--data', ''], '--data was given empty; it needs a value');

    // An option another command takes: dropped, it would have done what was not asked for.
    await emptied(
      ['history', 'a.txt', '--bucket', 'Docs', '--version', 'abcd'],
      'history does not take --version (it takes --bucket, --progress)',
    );
    await emptied(
      ['backup', source, '--bucket', 'Docs', '--overwrite', '--to', target],
      'backup does not take --overwrite, --to (it takes --bucket, --dry-run, --progress, --allow-empty, --replace-source, --skip-check, --limit-upload)',
    );
    await emptied(['whoami', '--bucket', 'Docs'], 'whoami does not take --bucket');
    // One another subcommand takes: the list is of every bucket, whatever the type asked for.
    await emptied(
      ['buckets', '--type', 'backup'],
      'buckets list does not take --type (buckets create takes it)',
    );

    // A word left out: the command's own lines of the help say what it takes.
    const missing = await runCanopy(home, ['history', '--bucket', 'Docs'], env);
    expect(missing.stderr).toBe(
      'canopy: PATH is required\nusage:\n' +
        '  history PATH --bucket NAME [--progress]           the versions in which PATH differs from the\n' +
        '                                                    version before, newest first\n',
    );
    expect(missing.status).toBe(2);
    const versionsNow = await runCanopy(home, ['versions', '--bucket', 'Docs', '--json'], env);
    expect(JSON.parse(versionsNow.stdout)).toHaveLength(1);
  });
});
