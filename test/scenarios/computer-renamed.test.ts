import { afterAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runCanopy, runCanopyAsHost } from '../helpers/canopy-cli.ts';

// The host name of a computer is not steady: a laptop's can follow the network it is on, and a
// user may rename it. Canopy names this computer in its backups' source labels by the name it
// had at its first backup, kept in the home: under another host name, the same folder is still
// the bucket's source, and a restore still knows where its files came from.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-computer-renamed-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const env = { CANOPY_SECRET_STORE: 'file' };

describe('a computer whose host name changes', () => {
  it('backs up the same folder into its bucket, and restores a file to where it was', async () => {
    const home = path.join(scratch, 'home');
    const source = path.join(scratch, 'Documents');
    mkdirSync(source);
    writeFileSync(path.join(source, 'letter.txt'), 'Dear Ann');
    expect((await runCanopy(home, ['login', '--local'], env)).status).toBe(0);
    expect((await runCanopy(home, ['buckets', 'create', 'Docs'], env)).status).toBe(0);
    const first = await runCanopy(home, ['backup', source, '--bucket', 'Docs'], env);
    expect(first.status, first.stderr).toBe(0);

    // On another network, the system names the computer otherwise.
    writeFileSync(path.join(source, 'letter.txt'), 'Dear Ann, again');
    const elsewhere = await runCanopyAsHost(
      'dhcp-10-0-1-7',
      home,
      ['backup', source, '--bucket', 'Docs', '--json'],
      env,
    );
    expect(elsewhere.stderr).toBe('');
    expect(elsewhere.status).toBe(0);
    expect(JSON.parse(elsewhere.stdout)).toMatchObject({ filesUnchanged: 0, bytesRead: 15 });

    // The file deleted by mistake, restored to its place under the new host name.
    rmSync(path.join(source, 'letter.txt'));
    const restored = await runCanopyAsHost(
      'renamed-laptop',
      home,
      ['restore', '--bucket', 'Docs', path.join(source, 'letter.txt')],
      env,
    );
    expect(restored.stderr).toBe('');
    expect(restored.status).toBe(0);
    expect(readFileSync(path.join(source, 'letter.txt'), 'utf8')).toBe('Dear Ann, again');
  });
});
