import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine, type Engine, type LocalService } from '../../main/index.ts';
import { startLocalService } from '../../cli/local-service.ts';

// The engine reaches its embedded service through a Unix socket in a private folder, and the
// loopback port still serves where no socket can be made. Either way a backup and its restore
// come back byte for byte.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-socket-'));
let engine: Engine | undefined;
const savedTmpdir = process.env['TMPDIR'];

afterEach(async () => {
  await engine?.close();
  engine = undefined;
  if (savedTmpdir === undefined) delete process.env['TMPDIR'];
  else process.env['TMPDIR'] = savedTmpdir;
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** An engine on its embedded service, with how each request reached the service. */
function engineWatchingTransport(name: string): {
  engine: Engine;
  transports: string[];
  services: LocalService[];
} {
  const transports: string[] = [];
  const services: LocalService[] = [];
  const observe = (app: FastifyInstance): void => {
    app.addHook('onRequest', (request, _reply, done) => {
      // A Unix socket's peer has no address.
      transports.push(request.raw.socket.remoteAddress === undefined ? 'socket' : 'tcp');
      done();
    });
  };
  const home = path.join(scratch, name, 'home');
  const created = createEngine({
    home,
    secrets: new FileSecretStore(home),
    startLocalService: async (dataDir, options) => {
      const service = await startLocalService(dataDir, options, observe);
      services.push(service);
      return service;
    },
  });
  return { engine: created, transports, services };
}

/** A small tree with a file of several chunks, backed up and restored; returns the restore. */
async function backUpAndRestore(name: string, running: Engine): Promise<string> {
  const source = path.join(scratch, name, 'source');
  mkdirSync(path.join(source, 'docs'), { recursive: true });
  writeFileSync(path.join(source, 'docs', 'note.txt'), 'a note\n');
  writeFileSync(path.join(source, 'large.bin'), randomBytes(3 * 1024 * 1024 + 5));
  await running.loginLocal({ dataDir: path.join(scratch, name, 'data') });
  await running.createBucket({ name: 'Socket', type: 'backup', storageClass: 'hot' });
  await running.backup({ dir: source, bucket: 'Socket' });
  const target = path.join(scratch, name, 'restored');
  await running.restore({ bucket: 'Socket', to: target, overwrite: false });
  const digestOf = (file: string): string =>
    createHash('sha256').update(readFileSync(file)).digest('hex');
  for (const file of ['docs/note.txt', 'large.bin'])
    expect(digestOf(path.join(target, file))).toBe(digestOf(path.join(source, file)));
  return target;
}

describe('the embedded service socket', () => {
  it('carries every request of a backup and its restore, from a private folder removed at close', async () => {
    const watched = engineWatchingTransport('socket');
    engine = watched.engine;
    await backUpAndRestore('socket', engine);
    const [service] = watched.services;
    const socketPath = service?.socketPath ?? '';
    expect(socketPath).not.toBe('');
    const folder = statSync(path.dirname(socketPath));
    expect(folder.mode & 0o777).toBe(0o700);
    expect(statSync(socketPath).isSocket()).toBe(true);
    expect(watched.transports.length).toBeGreaterThan(5);
    expect(new Set(watched.transports)).toEqual(new Set(['socket']));
    await engine.close();
    engine = undefined;
    expect(existsSync(path.dirname(socketPath))).toBe(false);
  });

  it('removes the socket folders that killed Canopy processes left, and no other', async () => {
    const tmp = path.join(scratch, 'tmp-with-leftovers');
    mkdirSync(tmp);
    process.env['TMPDIR'] = tmp;
    // A process that has ended: its id names no running process.
    const ended = spawnSync(process.execPath, ['-e', '']).pid;
    const left = {
      killed: `canopy-service-${ended}-aB3dE9`,
      running: `canopy-service-${process.ppid}-Xy7Zq2`,
      unnamed: 'canopy-service-Qw8Rt1',
      other: 'another-app-folder',
    };
    for (const name of Object.values(left)) {
      mkdirSync(path.join(tmp, name));
      writeFileSync(path.join(tmp, name, 'service.sock'), '');
    }
    const service = await startLocalService(path.join(scratch, 'leftovers-data'));
    try {
      expect(path.basename(path.dirname(service.socketPath ?? ''))).toMatch(
        new RegExp(`^canopy-service-${process.pid}-`),
      );
      expect(existsSync(path.join(tmp, left.killed))).toBe(false);
      for (const kept of [left.running, left.unnamed, left.other])
        expect(existsSync(path.join(tmp, kept, 'service.sock'))).toBe(true);
    } finally {
      await service.close();
    }
    expect(existsSync(path.dirname(service.socketPath ?? ''))).toBe(false);
  });

  it('serves on its port alone where no socket can be made, and the backup still round-trips', async () => {
    process.env['TMPDIR'] = path.join(scratch, 'no-such-folder');
    const watched = engineWatchingTransport('port');
    engine = watched.engine;
    await backUpAndRestore('port', engine);
    expect(watched.services.map((service) => service.socketPath)).toEqual([undefined]);
    expect(watched.transports.length).toBeGreaterThan(5);
    expect(new Set(watched.transports)).toEqual(new Set(['tcp']));
  });
});
