import { afterAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { runCanopy } from '../helpers/canopy-cli.ts';
import { startFaultProxy } from '../helpers/fault-proxy.ts';
import { startTestService } from '../helpers/test-service.ts';

// An address that does not answer as the service does. A server that moved and left its old
// address redirecting to the new one (or a network that sends every request to its sign-in
// page): Canopy tells where it is sent, and follows nowhere. Followed, the device's token did
// not reach the new address, whose 401 told the user their key may have been revoked and to
// enroll again. Another web server at the address (a wrong one, or a path left off): told as
// such, rather than as "not found on the server" or "a body that is not JSON".

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-not-the-server-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('a server whose address redirects', () => {
  it('is told where it points, by a backup, `canopy buckets` and a login, while the versions are browsed from this computer', async () => {
    const service = await startTestService();
    const proxy = await startFaultProxy(service.url);
    try {
      const home = path.join(scratch, 'home');
      const env = { CANOPY_SECRET_STORE: 'file' };
      const source = path.join(scratch, 'source');
      mkdirSync(source);
      writeFileSync(path.join(source, 'plan.txt'), 'before the move');
      const { code } = service.addUser('ann@example.org');
      expect(
        (await runCanopy(home, ['login', '--server', proxy.url, '--code', code], env)).status,
      ).toBe(0);
      expect((await runCanopy(home, ['buckets', 'create', 'Plans'], env)).status).toBe(0);
      expect((await runCanopy(home, ['backup', source, '--bucket', 'Plans'], env)).status).toBe(0);
      const online = await runCanopy(home, ['ls', '--bucket', 'Plans'], env);
      expect(online.stderr).toBe('');

      proxy.schedule(Array.from({ length: 50 }, () => ({ redirectTo: service.url })));
      proxy.seen.length = 0;
      const told = (what: string): string =>
        `canopy: ${proxy.url} sent Canopy on to ${service.url}/api/v1${what} (HTTP 301) rather than answering as a Canopy server: if the server has moved there, log in at its new address (canopy logout, then canopy login --server ${service.url}); a network that wants you to sign in first (a hotel's or café's Wi-Fi) answers so too: sign in from a web browser, then try again\n`;
      writeFileSync(path.join(source, 'plan.txt'), 'after the move');
      const backup = await runCanopy(home, ['backup', source, '--bucket', 'Plans'], env);
      expect(backup.status).toBe(1);
      expect(backup.stderr).toBe(told('/buckets'));
      // Asked once: a redirect is not a failure that asking again mends.
      expect(proxy.seen).toHaveLength(1);
      const buckets = await runCanopy(home, ['buckets'], env);
      expect(buckets.status).toBe(1);
      expect(buckets.stderr).toBe(told('/buckets'));
      const kept = await runCanopy(home, ['ls', '--bucket', 'Plans'], env);
      expect(kept.status).toBe(0);
      expect(kept.stdout).toBe(online.stdout);
      expect(kept.stderr).toMatch(
        /^canopy: the server sends Canopy elsewhere \(canopy buckets says where\); showing version /,
      );

      // Logging in at the old address, from another computer: told the new one to use instead.
      const elsewhere = await runCanopy(
        path.join(scratch, 'other-home'),
        ['login', '--server', proxy.url, '--code', service.addUser('bob@example.org').code],
        env,
      );
      expect(elsewhere.status).toBe(1);
      expect(elsewhere.stderr).toBe(
        `canopy: ${proxy.url} sent Canopy on to ${service.url}/api/v1/auth/enroll (HTTP 301) rather than answering as a Canopy server: if the server has moved there, use its new address, ${service.url}; a network that wants you to sign in first (a hotel's or café's Wi-Fi) answers so too: sign in from a web browser, then try again\n`,
      );

      // A redirect of the push itself, whose body (the metadata CAR) is streamed: fetch refuses
      // it without telling where it pointed, rather than keep a copy of all it sent for one.
      proxy.schedule([{ redirectTo: service.url }], /\/buckets\/metadata$/);
      proxy.seen.length = 0;
      const pushed = await runCanopy(home, ['backup', source, '--bucket', 'Plans'], env);
      expect(pushed.status).toBe(1);
      expect(pushed.stderr).toBe(
        `canopy: ${proxy.url} redirected its request rather than answering as a Canopy server: a network that wants you to sign in first (a hotel's or café's Wi-Fi) answers so too: sign in from a web browser, then try again\n`,
      );
      expect(proxy.seen.filter((seen) => seen.path.endsWith('/buckets/metadata'))).toHaveLength(1);

      // Its address answering again, the backup goes on as before.
      proxy.schedule([]);
      const again = await runCanopy(home, ['backup', source, '--bucket', 'Plans'], env);
      expect(again.status, again.stderr).toBe(0);
      expect(again.stdout).toMatch(/^1 files? \(0 unchanged, not read again\), /m);
    } finally {
      await proxy.close();
      await service.close();
    }
  });
});

describe('an address that is not a Canopy server', () => {
  it('is told as such at login, for a web app there and for a path left off', async () => {
    // A web app whose every path answers its page, as a single-page app's server does.
    const webApp = createServer((request, response) => {
      request.resume();
      response.writeHead(200, { 'content-type': 'text/html' });
      response.end('<!doctype html><html><body><div id="app"></div></body></html>');
    });
    await new Promise<void>((resolve) => webApp.listen(0, '127.0.0.1', resolve));
    const address = webApp.address();
    const webAppUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
    const service = await startTestService();
    try {
      const env = { CANOPY_SECRET_STORE: 'file' };
      const { code } = service.addUser('ann@example.org');
      const home = path.join(scratch, 'web-app-home');
      const atWebApp = await runCanopy(home, ['login', '--server', webAppUrl, '--code', code], env);
      expect(atWebApp.status).toBe(1);
      expect(atWebApp.stderr).toBe(
        `canopy: ${webAppUrl} answered, but not as a Canopy server does (HTTP 200, a web page): check the server's address, as its administrator gave it (a service under a path, such as https://example.org/canopy, needs that path)\n`,
      );
      const wrongPath = await runCanopy(
        home,
        ['login', '--server', `${service.url}/canopy`, '--code', code],
        env,
      );
      expect(wrongPath.status).toBe(1);
      expect(wrongPath.stderr).toBe(
        `canopy: no Canopy server answers at ${service.url}/canopy (its enrollment is not found there, HTTP 404): check the server's address, as its administrator gave it (a service under a path, such as https://example.org/canopy, needs that path)\n`,
      );
      // The code was not spent: at the right address, it enrolls the device.
      const right = await runCanopy(home, ['login', '--server', service.url, '--code', code], env);
      expect(right.status, right.stderr).toBe(0);
    } finally {
      await service.close();
      await new Promise((resolve) => webApp.close(resolve));
    }
  });
});
