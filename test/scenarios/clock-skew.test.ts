import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runCanopy } from '../helpers/canopy-cli.ts';
import { clockOffEnv } from '../helpers/faked-clock.ts';
import {
  addUserCode,
  startServerProcess,
  stopServerProcess,
  type ServerProcess,
} from '../helpers/server-process.ts';
import { writeSettled } from '../helpers/settled-file.ts';

// A computer whose clock is set wrong, backing up to a server whose clock is right. A device
// token is judged by the server's clock (§5.1: dated no later than 20 s ahead of it, expired
// 5 min after), and an upload's window ends by it (§10.2). The device learns the server's time
// from its answers: it logs in, backs up and restores as any other, and its upload keeps to
// the server's window, neither ending it early nor thinking it over.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-clock-skew-'));
const serverData = path.join(scratch, 'server');
let server: ServerProcess;
beforeAll(async () => {
  server = await startServerProcess(serverData);
});
afterAll(async () => {
  await stopServerProcess(server, 'SIGTERM');
  rmSync(scratch, { recursive: true, force: true });
});

function enrollmentCode(email: string): string {
  return addUserCode(serverData, email);
}

describe('a computer whose clock is wrong', () => {
  // 13 h ahead: past half of the server's 24 h window, by this computer's clock, at the push.
  it.each(['+13h', '-2h'])('by %s backs up and restores byte for byte', async (offset) => {
    const run = path.join(scratch, offset);
    const home = path.join(run, 'home');
    const source = path.join(run, 'source');
    for (let i = 0; i < 3; i += 1)
      writeSettled(path.join(source, `part-${i}.bin`), randomBytes(300_000 + i));
    const env = { CANOPY_SECRET_STORE: 'file', ...clockOffEnv(offset) };
    const canopy = async (args: readonly string[]): Promise<string> => {
      const result = await runCanopy(home, args, env);
      expect(result.stderr).toBe('');
      expect(result.status).toBe(0);
      return result.stdout;
    };

    const code = enrollmentCode(`clock${offset.replace(/\W/g, '')}@example.org`);
    await canopy(['login', '--server', server.url, '--code', code]);
    await canopy(['buckets', 'create', 'Work', '--type', 'backup', '--class', 'hot']);
    const backup = await canopy(['backup', source, '--bucket', 'Work']);
    expect(backup).toMatch(/^version \S+\n3 files/);
    // One version, made in one window: the upload neither went on as another nor was dropped.
    expect(await canopy(['versions', '--bucket', 'Work'])).toMatch(/\n\S+\s+active\s[^\n]*\n?$/);
    await canopy(['restore', '--bucket', 'Work', '--to', path.join(run, 'restored')]);
    for (const name of readdirSync(source))
      expect(
        readFileSync(path.join(run, 'restored', name)).equals(
          readFileSync(path.join(source, name)),
        ),
      ).toBe(true);
  });
});
