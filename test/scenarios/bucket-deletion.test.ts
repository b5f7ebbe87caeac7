import { afterAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runCanopy } from '../helpers/canopy-cli.ts';
import { canopyProcess } from '../helpers/canopy-command-line.ts';
import { onTerminal, type TerminalEnd } from '../helpers/on-terminal.ts';
import { TOLD_TIME } from '../helpers/told-time.ts';

// `canopy buckets delete NAME` deletes every version in the bucket, for good. One that holds
// versions goes only once the user types its name back at the terminal, or with --yes; from a
// script without --yes it is refused, and an empty bucket goes at once.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-bucket-deletion-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const env = { CANOPY_SECRET_STORE: 'file' };

describe('deleting a bucket', () => {
  it('asks for its name on a terminal, wants --yes from a script, and deletes an empty one at once', async () => {
    const home = path.join(scratch, 'home');
    expect((await runCanopy(home, ['login', '--local'], env)).status).toBe(0);
    const source = path.join(scratch, 'photos');
    mkdirSync(source);
    writeFileSync(path.join(source, 'beach.jpg'), 'the sea');
    for (const bucket of ['Photos', 'Spare'])
      expect((await runCanopy(home, ['buckets', 'create', bucket], env)).status).toBe(0);
    for (let backup = 0; backup < 2; backup += 1) {
      writeFileSync(path.join(source, 'notes.txt'), `backup ${backup}`);
      const made = await runCanopy(home, ['backup', source, '--bucket', 'Photos'], env);
      expect(made.status, made.stderr).toBe(0);
    }
    const bucketNames = async (): Promise<string[]> =>
      (
        JSON.parse((await runCanopy(home, ['buckets', '--json'], env)).stdout) as {
          name: string;
        }[]
      ).map((bucket) => bucket.name);
    const holds = new RegExp(
      `bucket "Photos" holds 2 versions, the newest made ${TOLD_TIME} \\(\\d+ B of data in all\\); deleting the bucket deletes them all, for good`,
    );

    // From a script (no terminal to ask at): refused, with what it holds, and how to go on.
    const scripted = await runCanopy(home, ['buckets', 'delete', 'Photos'], env);
    expect(scripted.status).toBe(2);
    expect(scripted.stderr).toMatch(new RegExp(`^canopy: ${holds.source}`));
    expect(scripted.stderr).toMatch(/: add --yes to delete it without being asked\n$/);
    const json = await runCanopy(home, ['buckets', 'delete', 'Photos', '--json'], env);
    expect(JSON.parse(json.stderr)).toMatchObject({ error: { code: 'usage' } });
    expect(await bucketNames()).toEqual(['Photos', 'Spare']);

    /** `canopy buckets delete Photos` on a terminal, answered with `answer` (null: Ctrl-D). */
    const onTerminalAnswering = async (answer: string | null): Promise<TerminalEnd> => {
      const canopy = canopyProcess(['buckets', 'delete', 'Photos'], {
        ...process.env,
        CANOPY_HOME: home,
        ...env,
      });
      const terminal = onTerminal(canopy.command, canopy.args, canopy.env);
      await terminal.shows("Type the bucket's name to delete it: ");
      if (answer === null) terminal.endInput();
      else terminal.type(answer);
      return terminal.ended;
    };
    const mistyped = await onTerminalAnswering('Photo');
    expect(mistyped, mistyped.shown).toMatchObject({ code: 1 });
    expect(mistyped.shown).toMatch(holds);
    expect(mistyped.shown).toContain("Type the bucket's name to delete it: ");
    expect(mistyped.shown).toContain(
      'canopy: bucket "Photos" was not deleted: the name typed is not its own',
    );
    const noAnswer = await onTerminalAnswering(null);
    expect(noAnswer, noAnswer.shown).toMatchObject({ code: 1 });
    expect(noAnswer.shown).toContain('canopy: bucket "Photos" was not deleted: no name was typed');
    expect(await bucketNames()).toEqual(['Photos', 'Spare']);
    const confirmed = await onTerminalAnswering('Photos');
    expect(confirmed, confirmed.shown).toMatchObject({ code: 0 });
    expect(confirmed.shown).toContain('deleted bucket "Photos"');
    expect(await bucketNames()).toEqual(['Spare']);

    // With --yes, from a script: not asked. An empty bucket holds nothing to lose: not asked.
    const again = await runCanopy(home, ['buckets', 'create', 'Photos'], env);
    expect(again.status).toBe(0);
    expect(
      (await runCanopy(home, ['backup', source, '--bucket', 'Photos', '--skip-check'], env)).status,
    ).toBe(0);
    const yes = await runCanopy(home, ['buckets', 'delete', 'Photos', '--yes'], env);
    expect(yes).toMatchObject({ status: 0, stdout: 'deleted bucket "Photos"\n', stderr: '' });
    const empty = await runCanopy(home, ['buckets', 'delete', 'Spare'], env);
    expect(empty).toMatchObject({ status: 0, stdout: 'deleted bucket "Spare"\n', stderr: '' });
    expect(await bucketNames()).toEqual([]);
  });
});
