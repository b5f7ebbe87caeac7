import { afterAll, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { request } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { call } from '../helpers/http-client.ts';
import { rawBlock, shardOf } from '../helpers/cars.ts';
import { newPem, push } from '../helpers/flows.ts';
import {
  runServerCommand,
  startServerProcess,
  stopServerProcess,
} from '../helpers/server-process.ts';
import { TestDevice } from '../helpers/test-device.ts';

// The real `canopy-server` killed in the middle of a shard upload, then started again.

const dataDir = mkdtempSync(path.join(os.tmpdir(), 'canopy-restart-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

describe('restart', () => {
  it('a server killed mid-shard comes back with the version pending, no partial block, and completes', async () => {
    const added = runServerCommand([
      'user',
      'add',
      '--email',
      'ann@example.org',
      '--data',
      dataDir,
      '--json',
    ]);
    expect(added.status).toBe(0);
    const { code, user_id: userId } = JSON.parse(added.stdout) as { code: string; user_id: string };
    let server = await startServerProcess(dataDir);
    const api = `${server.url}/api/v1`;
    const device = new TestDevice();
    expect(
      (await call('POST', `${api}/auth/enroll`, { json: { code, pem: device.pem } })).status,
    ).toBe(200);
    device.userId = userId;
    const bucket = await call('POST', `${api}/buckets`, {
      token: device.token(),
      json: { name: 'b', type: 'backup', storage_class: 'hot', initial_bucket_key_pem: newPem() },
    });
    const blocks = [
      await rawBlock(new Uint8Array(1 << 20).fill(1)),
      await rawBlock(new Uint8Array(1 << 20).fill(2)),
    ];
    const shard = await shardOf(blocks);
    const pushed = await push({ api }, device, {
      bucketId: bucket.json.id,
      expectedDataSize: 2 << 20,
      previousId: null,
    });
    const versionId = pushed.json.id as string;
    const sa = pushed.json.storage_authorization as string;

    // Send three quarters of the shard, then kill -9 the server while it waits for the rest.
    const target = new URL(`${api}/upload/${versionId}/${shard.cid.toString()}`);
    const upload = request(target, {
      method: 'PUT',
      headers: {
        authorization: `Bearer ${sa}`,
        'content-type': 'application/vnd.ipld.car',
        'content-length': shard.car.length,
      },
    });
    const failed = new Promise<void>((resolve) => {
      upload.on('error', () => resolve());
      upload.on('response', () => resolve());
    });
    upload.write(shard.car.subarray(0, Math.floor(shard.car.length * 0.75)));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await stopServerProcess(server, 'SIGKILL')).toBeNull();
    await failed;
    // What a kill between a pack's rename and its transaction's commit leaves: a pack no row names.
    const orphanPack = path.join(dataDir, 'packs', `${randomUUID()}.pack`);
    writeFileSync(orphanPack, blocks[0]?.bytes ?? new Uint8Array());
    // And an operator's copy of a pack kept aside, and a file a sync tool left: not of the
    // service's naming, so not its to remove.
    writeFileSync(path.join(dataDir, 'packs', `${randomUUID()}.pack.orig`), 'a copy');
    const chunks = path.join(dataDir, 'metadata', 'chunks');
    mkdirSync(chunks, { recursive: true });
    writeFileSync(path.join(chunks, '.syncthing.tmp'), 'half a file');
    // What an upload killed while it named a stored block leaves: a pin no upload will lift,
    // which would keep that block from garbage collection for good.
    const database = new Database(path.join(dataDir, 'service.sqlite'));
    database
      .prepare('INSERT INTO upload_pins (upload, cid) VALUES (?, ?)')
      .run(randomUUID(), blocks[0]?.cid.toString());
    database.close();

    server = await startServerProcess(dataDir);
    const restarted = `${server.url}/api/v1`;
    expect(readdirSync(path.join(dataDir, 'staging'))).toEqual([]);
    expect(readdirSync(path.join(dataDir, 'packs'))).toEqual([
      expect.stringMatching(/\.pack\.orig$/),
    ]);
    expect(readdirSync(chunks)).toContain('.syncthing.tmp');
    const pins = new Database(path.join(dataDir, 'service.sqlite'), { readonly: true });
    expect(pins.prepare('SELECT cid FROM upload_pins').all()).toEqual([]);
    pins.close();
    const version = await call('GET', `${restarted}/buckets/metadata/${versionId}`, {
      token: device.token(),
    });
    expect(version.json).toMatchObject({ state: 'pending', data_size: 2 << 20 });
    for (const block of blocks) {
      expect(
        (
          await call('GET', `${restarted}/blocks/${block.cid.toString()}`, {
            token: device.token(),
          })
        ).status,
      ).toBe(404);
    }
    const missing = await call('POST', `${restarted}/blocks/missing`, {
      token: sa,
      json: blocks.map((b) => b.cid.toString()),
    });
    expect(missing.json).toHaveLength(2);

    const resumed = await call('PUT', `${restarted}/upload/${versionId}/${shard.cid.toString()}`, {
      token: sa,
      body: shard.car,
      contentType: 'application/vnd.ipld.car',
    });
    expect(resumed.json).toEqual({ blocks: 2, bytes: 2 << 20, received_total: 2 << 20 });
    const done = await call('POST', `${restarted}/upload/${versionId}/complete`, { token: sa });
    expect(done.json.state).toBe('active');
    expect(
      readdirSync(path.join(dataDir, 'packs')).filter((name) => name.endsWith('.pack')),
    ).toHaveLength(1);
    const read = await call('GET', `${restarted}/blocks/${blocks[1]?.cid.toString()}`, {
      token: device.token(),
    });
    expect(Buffer.from(read.bytes).equals(Buffer.from(blocks[1]?.bytes ?? []))).toBe(true);

    // SIGTERM stops it cleanly.
    expect(await stopServerProcess(server, 'SIGTERM')).toBe(0);
  });

  it("a second server on the same data folder leaves the first one's uploads alone; a lone start recovers", async () => {
    const shared = mkdtempSync(path.join(os.tmpdir(), 'canopy-two-servers-'));
    try {
      const first = await startServerProcess(shared);
      // What the first server has in flight: a shard it is receiving, and a pack between its
      // rename into place and the commit of its rows.
      const receiving = path.join(shared, 'staging', `${randomUUID()}.pack`);
      writeFileSync(receiving, 'half a pack');
      const committing = path.join(shared, 'packs', `${randomUUID()}.pack`);
      writeFileSync(committing, 'a whole pack');
      // The embedded service of a second `canopy` command, on the same folder.
      const second = await startServerProcess(shared);
      expect(existsSync(receiving)).toBe(true);
      expect(existsSync(committing)).toBe(true);
      // Killed, the first leaves no lock behind: once the second stops, a new server is alone
      // and clears what the killed one left.
      expect(await stopServerProcess(first, 'SIGKILL')).toBeNull();
      expect(await stopServerProcess(second, 'SIGTERM')).toBe(0);
      const lone = await startServerProcess(shared);
      expect(existsSync(receiving)).toBe(false);
      expect(existsSync(committing)).toBe(false);
      expect(await stopServerProcess(lone, 'SIGTERM')).toBe(0);
    } finally {
      rmSync(shared, { recursive: true, force: true });
    }
  });

  it('the admin commands work while serve runs on the same data folder, with clear errors', async () => {
    const server = await startServerProcess(dataDir);
    try {
      // A shard the server is receiving right now; admin commands must leave it alone.
      const receiving = path.join(dataDir, 'staging', `${randomUUID()}.pack`);
      writeFileSync(receiving, 'half a pack');
      const code = runServerCommand([
        'enroll-code',
        '--email',
        'ann@example.org',
        '--data',
        dataDir,
        '--json',
      ]);
      expect(code.status).toBe(0);
      const device = new TestDevice();
      const enrolled = await call('POST', `${server.url}/api/v1/auth/enroll`, {
        json: { code: JSON.parse(code.stdout).code, pem: device.pem },
      });
      expect(enrolled.status).toBe(200);
      device.userId = enrolled.json.user_id;
      expect(
        runServerCommand([
          'invoice',
          'add',
          '--email',
          'ann@example.org',
          '--start',
          '2026-10-01',
          '--end',
          '2026-11-01',
          '--amount',
          '1299',
          '--status',
          'paid',
          '--data',
          dataDir,
        ]).status,
      ).toBe(0);
      expect(
        runServerCommand([
          'notify',
          '--email',
          'ann@example.org',
          '--severity',
          'warning',
          '--message',
          'Disk check tonight',
          '--sticky',
          '--data',
          dataDir,
        ]).status,
      ).toBe(0);
      const invoices = await call('GET', `${server.url}/api/v1/invoices`, {
        token: device.token(),
      });
      expect(invoices.json[0]).toMatchObject({
        total_amount: 1299,
        status: 'paid',
        billing_start: '2026-10-01T00:00:00Z',
      });
      const notes = await call('GET', `${server.url}/api/v1/notifications`, {
        token: device.token(),
      });
      expect(notes.json[0]).toMatchObject({
        message: 'Disk check tonight',
        severity: 'warning',
        dismissable: false,
      });
      const unknown = runServerCommand([
        'enroll-code',
        '--email',
        'nobody@example.org',
        '--data',
        dataDir,
      ]);
      expect(unknown.status).not.toBe(0);
      expect(unknown.stderr.trim()).toBe('canopy-server: no user with email nobody@example.org');
      const badStatus = runServerCommand([
        'invoice',
        'add',
        '--email',
        'ann@example.org',
        '--start',
        '2026-10-01',
        '--end',
        '2026-11-01',
        '--amount',
        '1',
        '--status',
        'lost',
        '--data',
        dataDir,
      ]);
      expect(badStatus.stderr).toContain('status must be one of');
      expect(existsSync(receiving)).toBe(true);
    } finally {
      await stopServerProcess(server, 'SIGTERM');
    }
  });
});
