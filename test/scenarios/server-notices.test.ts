import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { postNotification } from '../../server/admin.ts';
import { localHomeBackedUp, runCanopy } from '../helpers/canopy-cli.ts';
import { startFaultProxy, type FaultProxy } from '../helpers/fault-proxy.ts';
import { runServerCommand } from '../helpers/server-process.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
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
    await behindProxy('unfetched', async ({ service, proxy, home, source }) => {
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
    });
  });

  it('gives them up after 10 s of a server that does not answer, rather than holding the backup', async () => {
    await behindProxy('silent', async ({ proxy, home, source }) => {
      const isNotices = (method: string, requestPath: string): boolean =>
        method === 'GET' && requestPath.endsWith('/notifications');
      proxy.faultEach((method, requestPath) => (isNotices(method, requestPath) ? 'hang' : 'pass'));
      const stored = await runCanopy(home, ['backup', source, '--bucket', 'Plans'], fileStore);
      expect(stored.status, stored.stderr).toBe(0);
      expect(stored.stdout).toMatch(/^version /);
      expect(stored.stderr).toBe(
        "canopy: the server's notifications could not be fetched: the server gave no answer within 10 s\n",
      );
      // Asked once: not tried again, nor waited on as an outage, after the backup stood.
      expect(proxy.seen.filter((request) => isNotices(request.method, request.path))).toHaveLength(
        1,
      );
    });
  });
});

/** What a test of a home logged in through a fault proxy has. */
interface ProxiedHome {
  readonly service: TestService;
  readonly proxy: FaultProxy;
  readonly home: string;
  /** A folder holding plan.txt, not backed up yet. */
  readonly source: string;
}

/**
 * Runs `run` with a home logged in through a fault proxy to a test service as ann, with a
 * bucket Plans; closes the proxy and the service after.
 */
async function behindProxy(
  name: string,
  run: (proxied: ProxiedHome) => Promise<void>,
): Promise<void> {
  const service = await startTestService();
  const proxy = await startFaultProxy(service.url);
  try {
    const home = path.join(scratch, `${name}-home`);
    const source = path.join(scratch, `${name}-source`);
    writeSettled(path.join(source, 'plan.txt'), 'first draft');
    const { code } = service.addUser('ann@example.org');
    const login = await runCanopy(
      home,
      ['login', '--server', proxy.url, '--code', code],
      fileStore,
    );
    expect(login.status, login.stderr).toBe(0);
    expect((await runCanopy(home, ['buckets', 'create', 'Plans'], fileStore)).status).toBe(0);
    await run({ service, proxy, home, source });
  } finally {
    await proxy.close();
    await service.close();
  }
}
