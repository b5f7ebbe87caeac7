import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runCanopy } from '../helpers/canopy-cli.ts';
import { canopyProcess } from '../helpers/canopy-command-line.ts';
import { startConnectProxy } from '../helpers/connect-proxy.ts';
import { onTerminal } from '../helpers/on-terminal.ts';
import { startTlsFront } from '../helpers/tls-front.ts';
import {
  addUserCode,
  startServerProcess,
  stopServerProcess,
  type ServerProcess,
} from '../helpers/server-process.ts';
import { TOLD_TIME } from '../helpers/told-time.ts';

// `canopy` end to end, as a person runs it: real CLI processes, a real `canopy-server`, the
// real keychain (gnome-keyring set up by test/with-keyring.sh) and real Canopy homes.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-cli-'));
const serverData = path.join(scratch, 'server');
let server: ServerProcess;
afterAll(async () => {
  await stopServerProcess(server, 'SIGTERM');
  rmSync(scratch, { recursive: true, force: true });
});
beforeAll(async () => {
  server = await startServerProcess(serverData);
});

function newHome(name: string): string {
  return path.join(scratch, name);
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => path.join(entry.parentPath, entry.name));
}

function enrollmentCode(email: string): string {
  return addUserCode(serverData, email);
}

/** `canopy args` run as `nobody`, who, unlike root, may not write in root's folders. */
function canopyAsNobody(args: string[], env: Record<string, string>): SpawnSyncReturns<string> {
  const canopy = canopyProcess(args, { ...process.env, CANOPY_SECRET_STORE: 'file', ...env });
  return spawnSync(
    'setpriv',
    ['--reuid=nobody', '--regid=nogroup', '--clear-groups', canopy.command, ...canopy.args],
    { encoding: 'utf8', env: canopy.env },
  );
}

describe('canopy onboarding', () => {
  it('goes from nothing to a local backup bucket in three commands, with no secret in the home', async () => {
    const home = newHome('local');
    const login = await runCanopy(home, ['login', '--local']);
    expect(login.stderr).toBe('');
    expect(login.status).toBe(0);
    expect(login.stdout).toContain('logged in to this computer');
    expect(login.stdout).toContain('in the OS keychain');
    expect(
      (await runCanopy(home, ['buckets', 'create', 'Photos', '--type', 'backup', '--class', 'hot']))
        .status,
    ).toBe(0);
    const list = await runCanopy(home, ['buckets']);
    expect(list.stdout).toMatch(
      new RegExp(`^NAME\\s+TYPE\\s+CLASS\\s+UPDATED\\nPhotos\\s+backup\\s+hot\\s+${TOLD_TIME}\\n$`),
    );
    const json = JSON.parse((await runCanopy(home, ['buckets', '--json'])).stdout) as Array<{
      name: string;
    }>;
    expect(json.map((bucket) => bucket.name)).toEqual(['Photos']);
    // The embedded service's own signing key is the one private key allowed in a file (§16.12:
    // on the server, readable only by its account); the device's key stays in the keychain.
    const serviceKey = path.join(home, 'local-server', 'service-key.pem');
    expect(statSync(serviceKey).mode & 0o777).toBe(0o600);
    for (const file of filesUnder(home).filter((candidate) => candidate !== serviceKey)) {
      const bytes = readFileSync(file);
      expect(bytes.includes('PRIVATE KEY')).toBe(false);
      expect(bytes.includes('eyJhbGciOiJFUzM4NCI')).toBe(false);
    }
  });

  it('logs in with an enrollment code, and a bad code gets one clear line', async () => {
    const home = newHome('remote');
    const bad = await runCanopy(home, [
      'login',
      '--server',
      server.url,
      '--code',
      'AAAAA-BBBBB-CCCCC-DDDDD-EEEEE',
    ]);
    expect(bad.status).toBe(1);
    expect(bad.stderr).toBe(
      'canopy: server refused the enrollment code (expired, used or unknown)\n',
    );
    const code = enrollmentCode('ann@example.org');
    const good = await runCanopy(home, [
      'login',
      '--server',
      server.url,
      '--code',
      code.toLowerCase(),
      '--name',
      'studio',
    ]);
    expect(good.status).toBe(0);
    const who = JSON.parse((await runCanopy(home, ['whoami', '--json'])).stdout) as {
      email: string;
      mode: string;
    };
    expect(who).toMatchObject({ email: 'ann@example.org', mode: 'remote' });
    const again = await runCanopy(home, ['login', '--server', server.url, '--code', code]);
    expect(again.status).toBe(1);
    expect(again.stderr).toBe(
      `canopy: this Canopy home is already enrolled with ${server.url}; run \`canopy logout\` first to enroll it anew\n`,
    );
    const notLoggedIn = await runCanopy(newHome('nobody'), ['buckets']);
    expect(notLoggedIn.stderr).toBe(
      'canopy: this device is not logged in; run `canopy login` first\n',
    );
    const insecure = await runCanopy(newHome('insecure'), [
      'login',
      '--server',
      'http://backup.example.org',
      '--code',
      code,
    ]);
    expect(insecure.stderr).toMatch(/refusing plain http to backup.example.org/);
    expect(insecure.status).toBe(1);
    const ftp = await runCanopy(newHome('ftp'), [
      'login',
      '--server',
      'ftp://x.org',
      '--code',
      code,
    ]);
    expect(ftp.stderr).toBe('canopy: ftp: URLs are not supported; use https://\n');
    expect(ftp.status).toBe(2);
  });

  it('links a second home by regwait, approved from the first; revoking it locks it out, and revoking itself asks first', async () => {
    const first = newHome('first');
    const second = newHome('second');
    expect(
      (
        await runCanopy(first, [
          'login',
          '--server',
          server.url,
          '--code',
          enrollmentCode('bob@example.org'),
        ])
      ).status,
    ).toBe(0);
    let approved = false;
    const linking = runCanopy(
      second,
      ['link', '--server', server.url, '--json', '--name', 'laptop'],
      {},
      (text) => {
        for (const line of text.split('\n')) {
          if (!line.includes('"waiting"') || approved) continue;
          approved = true;
          const { pem } = JSON.parse(line) as { pem: string };
          const pemFile = path.join(scratch, 'laptop.pem');
          writeFileSync(pemFile, pem);
          void runCanopy(first, ['devices', 'approve', pemFile, '--name', 'laptop']);
        }
      },
    );
    const linked = await linking;
    expect(linked.status).toBe(0);
    const lines = linked.stdout.trim().split('\n');
    const account = JSON.parse(lines.at(-1) ?? '{}') as { email: string; keyId: string };
    expect(account.email).toBe('bob@example.org');
    const devices = JSON.parse((await runCanopy(first, ['devices', '--json'])).stdout) as Array<{
      id: string;
      current: boolean;
    }>;
    expect(devices).toHaveLength(2);
    expect((await runCanopy(second, ['buckets', 'create', 'Shared'])).status).toBe(0);
    expect((await runCanopy(first, ['buckets'])).stdout).toContain('Shared');
    const notes = path.join(scratch, 'laptop-notes');
    mkdirSync(notes);
    writeFileSync(path.join(notes, 'todo.txt'), 'call the bank\n');
    // Dated back: a file written just before a backup is read again by the next one.
    utimesSync(
      path.join(notes, 'todo.txt'),
      new Date(Date.now() - 60_000),
      new Date(Date.now() - 60_000),
    );
    expect((await runCanopy(second, ['backup', notes, '--bucket', 'Shared'])).status).toBe(0);
    expect((await runCanopy(first, ['devices', 'revoke', account.keyId])).status).toBe(0);
    const locked = await runCanopy(second, ['buckets']);
    expect(locked.status).toBe(1);
    expect(locked.stderr).toBe(
      'canopy: the server did not accept this device (the key may have been revoked); `canopy logout`, then `canopy login` or `canopy link`, enrolls it again, with its backups where they are\n',
    );
    // As the message says: logged out, then in with a code from the other device, it finds the
    // account's buckets.
    expect((await runCanopy(second, ['logout'])).status).toBe(0);
    const { code } = JSON.parse((await runCanopy(first, ['devices', 'code', '--json'])).stdout) as {
      code: string;
    };
    const renewed = await runCanopy(second, ['login', '--server', server.url, '--code', code]);
    expect(renewed.status, renewed.stderr).toBe(0);
    expect((await runCanopy(second, ['buckets'])).stdout).toContain('Shared');
    const again = await runCanopy(second, ['backup', notes, '--bucket', 'Shared', '--json']);
    expect(again.status, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ filesUnchanged: 1, bytesRead: 0 });

    // Revoking this very device is asked about first: on a terminal, yes typed; --yes in a script.
    const ownId = (
      JSON.parse((await runCanopy(second, ['whoami', '--json'])).stdout) as {
        keyId: string;
      }
    ).keyId;
    const scripted = await runCanopy(second, ['devices', 'revoke', ownId]);
    expect(scripted).toMatchObject({ status: 2, stdout: '' });
    expect(scripted.stderr).toBe(
      `canopy: device ${ownId} is this device, and once it is revoked, it reaches the account again only with a new enrollment code (canopy devices code, on another device): add --yes to revoke it without being asked\n`,
    );
    const canopy = canopyProcess(['devices', 'revoke', ownId], {
      ...process.env,
      CANOPY_HOME: second,
    });
    const terminal = onTerminal(canopy.command, canopy.args, canopy.env);
    await terminal.shows('Type yes to revoke it: ');
    terminal.type('no');
    const declined = await terminal.ended;
    expect(declined, declined.shown).toMatchObject({ code: 1 });
    expect(declined.shown).toContain('canopy: this device was not revoked: yes was not typed');
    expect((await runCanopy(second, ['buckets'])).status).toBe(0);
    const revoked = await runCanopy(second, ['devices', 'revoke', ownId, '--yes']);
    expect(revoked).toMatchObject({
      status: 0,
      stdout: `revoked device ${ownId}, this device, and logged it out\n`,
    });
    expect((await runCanopy(second, ['whoami'])).stderr).toMatch(
      /^canopy: this device is not logged in/,
    );
    // The account's last device: only the server's administrator could let it in again.
    const firstId = (
      JSON.parse((await runCanopy(first, ['whoami', '--json'])).stdout) as {
        keyId: string;
      }
    ).keyId;
    const last = await runCanopy(first, ['devices', 'revoke', firstId]);
    expect(last.status).toBe(2);
    expect(last.stderr).toContain(
      "is this device, and it is the account's only device: once it is revoked, only the server's administrator can let you in again",
    );
    expect((await runCanopy(first, ['devices'])).status).toBe(0);
  });

  it('manages buckets, the account and notifications', async () => {
    const home = newHome('manager');
    expect(
      (
        await runCanopy(home, [
          'login',
          '--server',
          server.url,
          '--code',
          enrollmentCode('carol@example.org'),
        ])
      ).status,
    ).toBe(0);
    expect(
      (
        await runCanopy(home, [
          'buckets',
          'create',
          'Docs',
          '--type',
          'interactive',
          '--class',
          'cold',
        ])
      ).status,
    ).toBe(0);
    expect((await runCanopy(home, ['buckets', 'rename', 'Docs', 'Papers'])).status).toBe(0);
    expect((await runCanopy(home, ['buckets', 'create', 'X', '--type', 'archive'])).stderr).toBe(
      'canopy: --type must be one of backup, interactive\n',
    );
    expect((await runCanopy(home, ['buckets', 'delete', 'Nope'])).stderr).toBe(
      'canopy: no bucket named "Nope" (canopy buckets lists them; canopy buckets create makes one)\n',
    );
    expect((await runCanopy(home, ['buckets', 'delete', 'Papers'])).status).toBe(0);
    expect(
      (await runCanopy(home, ['account', 'set', '--display-name', 'Carol', '--locale', 'en-gb']))
        .status,
    ).toBe(0);
    const user = JSON.parse((await runCanopy(home, ['account', '--json'])).stdout) as {
      display_name: string;
      locale: string;
    };
    expect(user).toMatchObject({ display_name: 'Carol', locale: 'en-GB' });
    expect((await runCanopy(home, ['invoices'])).stdout).toBe('no invoices\n');
    const notes = JSON.parse((await runCanopy(home, ['notifications', '--json'])).stdout) as Array<{
      id: string;
      message_key: string;
    }>;
    expect(notes.map((n) => n.message_key)).toEqual(['bucket_deleted', 'device_key_added']);
    expect((await runCanopy(home, ['notifications', 'dismiss', notes[0]?.id ?? ''])).status).toBe(
      0,
    );
    expect(JSON.parse((await runCanopy(home, ['notifications', '--json'])).stdout)).toHaveLength(1);
    // Each says when it came.
    expect((await runCanopy(home, ['notifications'])).stdout).toMatch(
      new RegExp(
        `^ID +WHEN +SEVERITY +MESSAGE\\n${notes[1]?.id ?? ''} +${TOLD_TIME} +info +\\S.*\\n$`,
      ),
    );
  });

  it('falls back to a 0600 secrets file when forced, and warns once when chosen for lack of a keychain', async () => {
    const home = newHome('file-store');
    const login = await runCanopy(home, ['login', '--local'], { CANOPY_SECRET_STORE: 'file' });
    expect(login.status).toBe(0);
    expect(login.stdout).toContain('in the secrets file');
    expect(statSync(path.join(home, 'secrets.json')).mode & 0o777).toBe(0o600);
    const noBus = { DBUS_SESSION_BUS_ADDRESS: 'unix:path=/nonexistent' };
    const fallback = newHome('no-keychain');
    const first = await runCanopy(fallback, ['login', '--local'], noBus);
    expect(first.status).toBe(0);
    expect(first.stderr).toMatch(
      /^warning: no OS keychain answered, so Canopy keeps the private keys it makes here in .*secrets\.json \(readable only by you\); once a keychain answers, it keeps new ones there and still finds these\.\n/,
    );
    const second = await runCanopy(fallback, ['buckets'], noBus);
    expect(second.stderr).toBe('');
    expect(
      (await runCanopy(newHome('forced'), ['whoami'], { CANOPY_SECRET_STORE: 'vault' })).stderr,
    ).toBe('canopy: CANOPY_SECRET_STORE must be "keychain" or "file", not "vault"\n');
  });

  it('finds a key put in the secrets file once a keychain answers, and tells where a key is when its keychain does not', async () => {
    const noBus = { DBUS_SESSION_BUS_ADDRESS: 'unix:path=/nonexistent' };
    // Enrolled where no keychain answered (over ssh, say): the key went to the secrets file.
    const home = newHome('keychain-came-later');
    expect((await runCanopy(home, ['login', '--local'], noBus)).status).toBe(0);
    // A keychain answers now: the key is still found there, and a backup is made with it.
    const who = await runCanopy(home, ['whoami', '--json']);
    expect(JSON.parse(who.stdout)).toMatchObject({ secretStore: 'file' });
    const source = path.join(scratch, 'keychain-came-later-files');
    mkdirSync(source);
    writeFileSync(path.join(source, 'notes.txt'), 'still this device');
    expect(
      (await runCanopy(home, ['buckets', 'create', 'Notes', '--type', 'backup', '--class', 'hot']))
        .status,
    ).toBe(0);
    const backup = await runCanopy(home, ['backup', source, '--bucket', 'Notes']);
    expect(backup.stderr).toBe('');
    expect(backup.status).toBe(0);
    // Logged out, the key goes from the file, where it was.
    expect((await runCanopy(home, ['logout'])).status).toBe(0);
    expect(readFileSync(path.join(home, 'secrets.json'), 'utf8')).not.toContain('PRIVATE KEY');

    // Enrolled with the keychain, then run where none answers (cron): told where the key is.
    const keychained = newHome('keychain-unanswered');
    expect((await runCanopy(keychained, ['login', '--local'])).stdout).toContain(
      'in the OS keychain',
    );
    const unanswered = await runCanopy(keychained, ['buckets', 'list'], noBus);
    expect(unanswered.status).toBe(1);
    expect(unanswered.stderr.trimEnd().split('\n').at(-1)).toBe(
      `canopy: this device's key is not in ${path.join(keychained, 'secrets.json')}, and no OS keychain answered, where Canopy keeps it when one answers at login: run Canopy where your keychain answers (within your desktop session; cron and ssh reach none, a systemd user timer does), or else log in again to enroll this device anew; its backups are untouched`,
    );
    expect((await runCanopy(keychained, ['buckets', 'list'])).status).toBe(0);
  });

  it('tells a server whose certificate it does not trust at once, and how to trust one of your own', async () => {
    const front = await startTlsFront(scratch, server.url);
    try {
      const home = newHome('self-signed');
      const code = enrollmentCode('self-hosted@example.org');
      const refused = await runCanopy(home, [
        'login',
        '--server',
        front.url,
        '--code',
        code,
        '--json',
      ]);
      expect(refused.status).toBe(1);
      // Asked once: no retry makes a certificate trusted.
      expect(front.handshakesRefused()).toBe(1);
      expect(JSON.parse(refused.stderr)).toEqual({
        error: {
          code: 'untrusted_server',
          message: `cannot trust ${front.url}: its certificate is self-signed; on a network that wants you to sign in first (a hotel's or café's Wi-Fi), sign in from a web browser, then try again; if the server is your own, with a certificate of its own, set NODE_EXTRA_CA_CERTS to that certificate's file (or its authority's) and run the command again`,
          retryable: false,
        },
      });
      // Trusted by the user's word, the same code enrolls the device: the refusal used none of it.
      const trusted = await runCanopy(home, ['login', '--server', front.url, '--code', code], {
        NODE_EXTRA_CA_CERTS: front.certificate,
      });
      expect(trusted.stderr).toBe('');
      expect(trusted.stdout).toContain(`logged in to ${front.url}`);
      const trust = { NODE_EXTRA_CA_CERTS: front.certificate };
      expect((await runCanopy(home, ['buckets', 'create', 'Own'], trust)).status).toBe(0);
      const listed = await runCanopy(home, ['versions', '--bucket', 'Own'], trust);
      expect(listed.status).toBe(0);
      // Without the trust, what this computer keeps is still shown, and why it is all.
      const kept = await runCanopy(home, ['versions', '--bucket', 'Own']);
      expect(kept.status).toBe(0);
      expect(kept.stdout).toBe(listed.stdout);
      expect(kept.stderr).toMatch(
        /^canopy: this computer does not trust the server's certificate \(canopy buckets says why\); showing the versions as of \d{4}-/,
      );
    } finally {
      await front.close();
    }
  });

  it('reaches its server through the HTTP proxy the environment names, and directly when NO_PROXY names the server', async () => {
    const proxy = await startConnectProxy();
    try {
      const home = newHome('behind-a-proxy');
      const through = { HTTP_PROXY: proxy.url, HTTPS_PROXY: proxy.url, NO_PROXY: '' };
      const canopy = (env: Record<string, string>, ...args: string[]) =>
        runCanopy(home, args, { CANOPY_SECRET_STORE: 'file', ...env });
      const code = enrollmentCode('behind-a-proxy@example.org');
      const login = await canopy(through, 'login', '--server', server.url, '--code', code);
      expect(login.stderr).toBe('');
      expect(login.status).toBe(0);
      const source = path.join(scratch, 'behind-a-proxy-files');
      mkdirSync(source);
      writeFileSync(path.join(source, 'plan.txt'), 'sent through the proxy');
      expect((await canopy(through, 'buckets', 'create', 'Work')).status).toBe(0);
      const backup = await canopy(through, 'backup', source, '--bucket', 'Work');
      expect(backup.stderr).toBe('');
      expect(backup.status).toBe(0);
      const restored = path.join(scratch, 'behind-a-proxy-restored');
      expect((await canopy(through, 'restore', '--bucket', 'Work', '--to', restored)).status).toBe(
        0,
      );
      expect(readFileSync(path.join(restored, 'plan.txt'), 'utf8')).toBe('sent through the proxy');
      const host = new URL(server.url).host;
      expect(proxy.tunnels.length).toBeGreaterThan(0);
      expect(new Set(proxy.tunnels)).toEqual(new Set([host]));
      // The server named in NO_PROXY is reached directly.
      const before = proxy.tunnels.length;
      const direct = await canopy(
        { ...through, NO_PROXY: new URL(server.url).hostname },
        'buckets',
      );
      expect(direct.status).toBe(0);
      expect(direct.stdout).toContain('Work');
      expect(proxy.tunnels.length).toBe(before);
    } finally {
      await proxy.close();
    }
    // A proxy that wants a login: told at once, and asked once.
    const guarded = await startConnectProxy(407);
    try {
      const refused = await runCanopy(
        newHome('behind-a-guarded-proxy'),
        ['login', '--server', server.url, '--code', enrollmentCode('guarded@example.org')],
        { CANOPY_SECRET_STORE: 'file', HTTP_PROXY: guarded.url, HTTPS_PROXY: guarded.url },
      );
      expect(refused.status).toBe(1);
      expect(refused.stderr).toBe(
        `canopy: the proxy would not reach ${server.url}: it asks for a login: put yours in its address in HTTPS_PROXY (http://user:password@proxy:port)\n`,
      );
      expect(guarded.tunnels).toHaveLength(1);
    } finally {
      await guarded.close();
    }
  });

  it('tells a home that is not a folder, or that it may not write in, in one line', async () => {
    const file = path.join(scratch, 'home-is-a-file');
    writeFileSync(file, 'keep me');
    for (const home of [file, path.join(file, 'home')]) {
      const refused = await runCanopy(home, ['buckets', 'list']);
      expect(refused.stderr).toBe(
        `canopy: ${home}, where Canopy keeps its state, is not a folder (a file stands there, or where a folder above it would be)\n`,
      );
      expect(refused.status).toBe(2);
    }
    expect(readFileSync(file, 'utf8')).toBe('keep me');
    // Root writes anywhere: `nobody` may not write in a folder of root's.
    const locked = path.join(scratch, 'locked');
    mkdirSync(locked, { mode: 0o755 });
    chmodSync(scratch, 0o755);
    const home = path.join(locked, 'home');
    const denied = canopyAsNobody(['buckets', 'list'], { HOME: locked, CANOPY_HOME: home });
    expect(denied.stderr).toBe(
      `canopy: cannot write in ${home}, where Canopy keeps its state: permission denied\n`,
    );
    expect(denied.status).toBe(1);
    expect(existsSync(home)).toBe(false);
  });

  it('tells a folder for the backups that is not a folder, or that it may not write in, in one line', async () => {
    const file = path.join(scratch, 'data-is-a-file');
    writeFileSync(file, 'keep me');
    for (const data of [file, path.join(file, 'backups')]) {
      const refused = await runCanopy(newHome('data-in-file'), [
        'login',
        '--local',
        '--data',
        data,
      ]);
      expect(refused.stderr).toBe(
        `canopy: ${data}, where the backups are kept, is not a folder (a file stands there, or where a folder above it would be)\n`,
      );
      expect(refused.status).toBe(2);
    }
    expect(readFileSync(file, 'utf8')).toBe('keep me');
    // `nobody` has a home of its own, and may not write in a folder of root's.
    const rootsOnly = path.join(scratch, 'roots-only');
    mkdirSync(rootsOnly, { mode: 0o755 });
    chmodSync(scratch, 0o755);
    const home = path.join(scratch, 'nobodys-home');
    mkdirSync(home, { mode: 0o777 });
    chmodSync(home, 0o777);
    const data = path.join(rootsOnly, 'backups');
    const denied = canopyAsNobody(['login', '--local', '--data', data], {
      HOME: home,
      CANOPY_HOME: path.join(home, 'canopy'),
    });
    expect(denied.stderr).toBe(
      `canopy: cannot write in ${data}, where the backups are kept: permission denied\n`,
    );
    expect(denied.status).toBe(1);
    expect(existsSync(data)).toBe(false);
  });

  it('tells a mistyped command with the usage status, before it makes a home', async () => {
    const home = newHome('never-made');
    for (const word of ['bakup', 'constructor', 'toString']) {
      const typo = await runCanopy(home, [word, '--bucket', 'Photos']);
      expect(typo.stderr).toBe(`canopy: unknown command: ${word}\n`);
      expect(typo.status).toBe(2);
    }
    expect(existsSync(home)).toBe(false);
    const usage = await runCanopy(home, []);
    expect(usage.stdout).toMatch(/^usage: canopy <command>/);
    expect(usage.status).toBe(2);
  });
});
