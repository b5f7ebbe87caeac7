import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { postNotification } from '../../server/admin.ts';
import { localHomeBackedUp, runCanopy } from '../helpers/canopy-cli.ts';
import { startFaultProxy } from '../helpers/fault-proxy.ts';
import { runServerCommand } from '../helpers/server-process.ts';
import { startTestService } from '../helpers/test-service.ts';
import { writeSettled } from '../helpers/settled-file.ts';

// A backup run by a timer is all most users see of Canopy, so the server's warnings and errors
// (a quota nearly full, blocks found damaged on its disk) are shown after a backup's result,
// each once; `canopy notifications` lists them all, and info stays there.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-notices-'));
afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
});
const fileStore = { CANOPY_SECRET_STORE: 'file' };

function notify(data: string, severity: string, message: string): void {
  const posted = runServerCommand([
    'notify',
    '--data',
    data,
    '--email',
    'local@canopy.invalid',
    '--severity',
    severity,
    '--message',
    message,
  ]);
  expect(posted.status, posted.stderr).toBe(0);
}

describe("the server's notifications after a backup", () => {
  it('shows each warning and error once, after the result, and leaves info to `canopy notifications`', async () => {
    const { home, data, source } = await localHomeBackedUp(path.join(scratch, 'once'), 'Docs', {
      'plan.txt': 'first draft',
    });
    notify(data, 'warning', 'The disk of the backups is nearly full.');
    notify(data, 'info', 'Maintenance on Sunday.');

    writeSettled(path.join(source, 'plan.txt'), 'second draft');
    const first = await runCanopy(home, ['backup', source, '--bucket', 'Docs'], fileStore);
    expect(first.status, first.stderr).toBe(0);
    expect(first.stdout).toMatch(/^version /);
    expect(first.stderr).toMatch(
      /^canopy: the server's warning of \d{4}-\d\d-\d\d \d\d:\d\d:\d\d: The disk of the backups is nearly full\. \(`canopy notifications` lists it\)\n$/,
    );

    const again = await runCanopy(home, ['backup', source, '--bucket', 'Docs'], fileStore);
    expect(again.status, again.stderr).toBe(0);
    expect(again.stderr).toBe('');

    notify(data, 'error', 'Your quota is full.');
    const scripted = await runCanopy(
      home,
      ['backup', source, '--bucket', 'Docs', '--json'],
      fileStore,
    );
    expect(scripted.stderr).toBe('');
    const result = JSON.parse(scripted.stdout) as {
      notices: Array<{ severity: string; message: string }>;
    };
    expect(result.notices).toMatchObject([{ severity: 'error', message: 'Your quota is full.' }]);

    const listed = await runCanopy(home, ['notifications'], fileStore);
    for (const message of ['nearly full', 'Maintenance on Sunday', 'Your quota is full'])
      expect(listed.stdout).toContain(message);
  });

  it('says when they cannot be fetched, keeps the backup, and shows them after the next one', async () => {
    const service = await startTestService();
    const proxy = await startFaultProxy(service.url);
    try {
      const home = path.join(scratch, 'unfetched-home');
      const source = path.join(scratch, 'unfetched-source');
      writeSettled(path.join(source, 'plan.txt'), 'first draft');
      const { code } = service.addUser('ann@example.org');
      const login = await runCanopy(
        home,
        ['login', '--server', proxy.url, '--code', code],
        fileStore,
      );
      expect(login.status, login.stderr).toBe(0);
      expect((await runCanopy(home, ['buckets', 'create', 'Plans'], fileStore)).status).toBe(0);
      postNotification(service.service.ctx, {
        email: 'ann@example.org',
        severity: 'warning',
        message: 'The server restarts tonight.',
        key: 'admin_message',
        sticky: false,
      });

      proxy.faultEach((method, requestPath) =>
        method === 'GET' && requestPath.endsWith('/notifications')
          ? { status: 403, msg: 'forbidden here' }
          : 'pass',
      );
      const stored = await runCanopy(home, ['backup', source, '--bucket', 'Plans'], fileStore);
      expect(stored.status).toBe(0);
      expect(stored.stdout).toMatch(/^version /);
      expect(stored.stderr).toBe(
        "canopy: the server's notifications could not be fetched: unexpected answer from the server (HTTP 403)\n",
      );

      proxy.faultEach(undefined);
      const next = await runCanopy(home, ['backup', source, '--bucket', 'Plans'], fileStore);
      expect(next.status, next.stderr).toBe(0);
      expect(next.stderr).toContain('The server restarts tonight.');
    } finally {
      await proxy.close();
      await service.close();
    }
  });
});
