import { blockSetBench } from './block-set-bench.ts';
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { execFileSync } from 'node:child_process';
import {
  closeSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { mkdir, open, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { call } from '../test/helpers/http-client.ts';
import { metadataCar, multipartBody, rawBlock, shardOf, type Block } from '../test/helpers/cars.ts';
import { postCountingBytes } from './counting-post.ts';
import { newPem, push } from '../test/helpers/flows.ts';
import {
  runServerCommand,
  type ServerProcess,
  startServerProcess,
  stopServerProcess,
} from '../test/helpers/server-process.ts';
import { TestDevice } from '../test/helpers/test-device.ts';
import { RAW_CODEC, sha256CidOf } from '../main/protocol/index.ts';

// Figures for the server issue's targets, on loopback, against the real `canopy-server`
// process: shard upload and blocks/car throughput next to raw disk throughput of the same
// bytes, request latency, and the server's peak RSS. Prints; asserts nothing.

const MiB = 1 << 20;
const DATA_BYTES = Number(process.env['BENCH_SERVER_MIB'] ?? 256) * MiB;
const BLOCKS_PER_SHARD = 64;

/** PUT with node:http: lighter than fetch, so the figure is the server's, not the client's. */
async function putBody(url: string, token: string, body: Uint8Array): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, {
      method: 'PUT',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/vnd.ipld.car',
        'content-length': body.length,
      },
    });
    req.on('response', (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** GET with node:http, timed to the body's last byte; the client does not parse it. */
async function getReadingBody(url: string, token: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { authorization: `Bearer ${token}` } });
    req.on('response', (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

function mbps(bytes: number, ms: number): number {
  return bytes / MiB / (ms / 1000);
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

function peakRss(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? 0);
  return kb * 1024;
}

/** Writes blocks as files `first`, `first + 1`, … each with writeFile + fsync. */
async function rawWrite(dir: string, blocks: readonly Block[], first: number): Promise<number> {
  await mkdir(dir, { recursive: true });
  const start = performance.now();
  for (const [index, block] of blocks.entries()) {
    const handle = await open(path.join(dir, String(first + index)), 'w');
    await handle.writeFile(block.bytes);
    await handle.sync();
    await handle.close();
  }
  return performance.now() - start;
}

/** Reads blocks `first`, `first + 1`, … with readFile, the counterpart of the writes' writeFile. */
async function rawReadFile(dir: string, first: number, count: number): Promise<number> {
  const start = performance.now();
  for (let index = first; index < first + count; index += 1)
    await readFile(path.join(dir, String(index)));
  return performance.now() - start;
}

/**
 * Reads the same blocks the leanest way Node can: synchronous open, read into one reused
 * buffer, close. From the page cache that is a memory copy, several times what any socket on
 * this machine carries, so it bounds the service from far above rather than measuring it.
 */
function rawReadReused(dir: string, first: number, count: number): Promise<number> {
  const buffer = Buffer.allocUnsafe(MiB);
  const start = performance.now();
  for (let index = first; index < first + count; index += 1) {
    const fd = openSync(path.join(dir, String(index)), 'r');
    try {
      while (readSync(fd, buffer, 0, buffer.length, null) > 0);
    } finally {
      closeSync(fd);
    }
  }
  return Promise.resolve(performance.now() - start);
}

interface ReadRates {
  readonly service: number;
  readonly readFile: number;
  readonly reused: number;
}

function readLine(rates: ReadRates, how: string): string {
  const ratio = (raw: number): string => (rates.service / raw).toFixed(2);
  return (
    `blocks/car read     ${rates.service.toFixed(1)} MB/s   raw readFile ${rates.readFile.toFixed(1)} MB/s   ratio ${ratio(rates.readFile)} (target >= 0.7); ` +
    `one-buffer read ${rates.reused.toFixed(1)} MB/s   ratio ${ratio(rates.reused)}, ${how}`
  );
}

/**
 * Times each of `runs` once for one round, starting with a different one each round (with two,
 * ABBA over the rounds). This VM's disk absorbs a burst of a few hundred MB fast and then slows
 * to its sustained rate, so whichever of back-to-back runs went first would get the burst and
 * look faster. Returns the times in the order of `runs`.
 */
async function interleaved(
  round: number,
  runs: ReadonlyArray<() => Promise<number>>,
): Promise<number[]> {
  const times: number[] = [];
  for (let step = 0; step < runs.length; step += 1) {
    const index = (round + step) % runs.length;
    times[index] = await (runs[index] as () => Promise<number>)();
  }
  return times;
}

/** Flushes and drops the kernel's page cache; false where that is not permitted (not root). */
function dropPageCache(): boolean {
  try {
    execFileSync('sync');
    writeFileSync('/proc/sys/vm/drop_caches', '3');
    return true;
  } catch {
    return false;
  }
}

async function timed(action: () => Promise<void>): Promise<number> {
  const start = performance.now();
  await action();
  return performance.now() - start;
}

async function latency(
  samples: number,
  request: () => Promise<number>,
): Promise<{ p50: number; p99: number }> {
  const times: number[] = [];
  for (let i = 0; i < samples; i += 1) {
    const start = performance.now();
    const status = await request();
    if (status !== 200) throw new Error(`request failed with ${status}`);
    times.push(performance.now() - start);
  }
  times.sort((a, b) => a - b);
  return { p50: percentile(times, 50), p99: percentile(times, 99) };
}

/**
 * Uploads DATA_BYTES of fresh 1 MiB blocks as shards, each round next to a raw write of the
 * same blocks. All data is made before the first round, so the rounds run back to back at the
 * disk's sustained rate, not in the pauses of generating it. Only the CIDs are returned: the
 * bytes kept in this process made its collector the slowest part of the reads that follow.
 */
async function uploadShards(
  uploadUrl: string,
  storageAuthorization: string,
  rawDir: string,
): Promise<{ shardCids: string[][]; uploadMs: number; rawWriteMs: number }> {
  const rounds: Array<{ blocks: Block[]; shard: Awaited<ReturnType<typeof shardOf>> }> = [];
  for (let round = 0; round < DATA_BYTES / MiB / BLOCKS_PER_SHARD; round += 1) {
    const blocks: Block[] = [];
    for (let index = 0; index < BLOCKS_PER_SHARD; index += 1)
      blocks.push(await rawBlock(randomBytes(MiB)));
    rounds.push({ blocks, shard: await shardOf(blocks) });
  }
  let uploadMs = 0;
  let rawWriteMs = 0;
  for (const [round, { blocks, shard }] of rounds.entries()) {
    const [rawMs = 0, measuredMs = 0] = await interleaved(round, [
      () => rawWrite(rawDir, blocks, round * BLOCKS_PER_SHARD),
      () =>
        timed(async () => {
          const url = `${uploadUrl}/${shard.cid.toString()}`;
          const status = await putBody(url, storageAuthorization, shard.car);
          if (status !== 200) throw new Error(`shard upload failed: ${status}`);
        }),
    ]);
    uploadMs += measuredMs;
    rawWriteMs += rawMs;
  }
  const shardCids = rounds.map(({ blocks }) => blocks.map((block) => block.cid.toString()));
  return { shardCids, uploadMs, rawWriteMs };
}

/** A `canopy-server` process of its own in `dataDir`, with one enrolled device and a bucket. */
async function benchServer(
  dataDir: string,
  email: string,
  bucketName: string,
): Promise<{ server: ServerProcess; api: string; device: TestDevice; bucketId: string }> {
  const added = runServerCommand(['user', 'add', '--email', email, '--data', dataDir, '--json']);
  const { code, user_id: userId } = JSON.parse(added.stdout) as { code: string; user_id: string };
  const server = await startServerProcess(dataDir, ['--no-rate-limits']);
  const api = `${server.url}/api/v1`;
  const device = new TestDevice();
  await call('POST', `${api}/auth/enroll`, { json: { code, pem: device.pem } });
  device.userId = userId;
  const bucket = await call('POST', `${api}/buckets`, {
    token: device.token(),
    json: {
      name: bucketName,
      type: 'backup',
      storage_class: 'hot',
      initial_bucket_key_pem: newPem(),
    },
  });
  return { server, api, device, bucketId: bucket.json.id as string };
}

/** Blocks in the shard of tiny blocks (BENCH_TINY_BLOCKS; 1 000 000 by default, 43 MiB). */
const TINY_BLOCKS = Number(process.env['BENCH_TINY_BLOCKS'] ?? 1_000_000);

/**
 * One shard of TINY_BLOCKS blocks of 8 bytes, the most blocks a shard's bytes can carry, sent
 * to a server of its own while another client asks it for a missing route every 20 ms: how long
 * the shard takes, the longest the other client waited for an answer meanwhile (the server has
 * one thread; a shard's commit holds it), and the server's peak RSS.
 */
async function tinyBlockShard(workDir: string): Promise<string> {
  const { server, api, device, bucketId } = await benchServer(
    path.join(workDir, 'tiny-server'),
    'tiny@example.org',
    'tiny',
  );
  try {
    const pushed = await push({ api }, device, {
      bucketId,
      expectedDataSize: TINY_BLOCKS * 8,
      previousId: null,
    });
    const blocks: Block[] = [];
    for (let index = 0; index < TINY_BLOCKS; index += 1) {
      const bytes = Buffer.alloc(8);
      bytes.writeDoubleLE(index);
      blocks.push({ cid: sha256CidOf(RAW_CODEC, bytes), bytes });
    }
    const shard = await shardOf(blocks);
    blocks.length = 0;
    let longestMs = 0;
    let sending = true;
    const asking = (async () => {
      while (sending) {
        const start = performance.now();
        await getReadingBody(`${api}/no-such-route`, '');
        longestMs = Math.max(longestMs, performance.now() - start);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    const url = `${api}/upload/${pushed.json.id as string}/${shard.cid.toString()}`;
    let status = 0;
    const ms = await timed(async () => {
      status = await putBody(url, pushed.json.storage_authorization as string, shard.car);
    });
    sending = false;
    await asking;
    if (status !== 200) throw new Error(`the shard of tiny blocks failed: ${status}`);
    const rss = peakRss(server.child.pid ?? 0);
    return `tiny-block shard   ${TINY_BLOCKS} blocks of 8 bytes (${(shard.car.length / MiB).toFixed(0)} MiB) in ${(ms / 1000).toFixed(1)} s; another request waited up to ${(longestMs / 1000).toFixed(1)} s meanwhile; server peak RSS ${(rss / MiB).toFixed(0)} MB`;
  } finally {
    await stopServerProcess(server, 'SIGTERM');
  }
}

export async function runServerBench(): Promise<void> {
  const workDir = mkdtempSync(path.join(os.tmpdir(), 'canopy-bench-'));
  const dataDir = path.join(workDir, 'server');
  try {
    const { server, api, device, bucketId } = await benchServer(
      dataDir,
      'bench@example.org',
      'bench',
    );
    const pid = server.child.pid ?? 0;
    const pushed = await push({ api }, device, {
      bucketId,
      expectedDataSize: DATA_BYTES,
      previousId: null,
    });
    const versionId = pushed.json.id as string;
    const sa = pushed.json.storage_authorization as string;
    const rawDir = path.join(workDir, 'raw');
    const { shardCids, uploadMs, rawWriteMs } = await uploadShards(
      `${api}/upload/${versionId}`,
      sa,
      rawDir,
    );
    const uploadRss = peakRss(pid);
    await call('POST', `${api}/upload/${versionId}/complete`, { token: sa });

    const readToken = device.token();
    /**
     * blocks/car and two raw reads of the same blocks, interleaved; `cold` drops the page cache
     * before each. The rates are MB/s: service, readFile, and one reused buffer.
     */
    async function measureReads(passes: number, cold: boolean): Promise<ReadRates> {
      const totalMs = [0, 0, 0];
      let readBytes = 0;
      for (let round = 0; round < passes * shardCids.length; round += 1) {
        const first = (round % shardCids.length) * BLOCKS_PER_SHARD;
        const cids = shardCids[round % shardCids.length] ?? [];
        const settled =
          (run: () => Promise<number>): (() => Promise<number>) =>
          () => {
            if (cold) dropPageCache();
            return run();
          };
        const times = await interleaved(round, [
          settled(() =>
            timed(async () => {
              readBytes += await postCountingBytes(`${api}/blocks/car`, readToken, cids);
            }),
          ),
          settled(() => rawReadFile(rawDir, first, cids.length)),
          settled(() => rawReadReused(rawDir, first, cids.length)),
        ]);
        for (const [index, ms] of times.entries()) totalMs[index] = (totalMs[index] ?? 0) + ms;
      }
      const [serviceMs = 0, readFileMs = 0, reusedMs = 0] = totalMs;
      return {
        service: mbps(readBytes, serviceMs),
        readFile: mbps(passes * DATA_BYTES, readFileMs),
        reused: mbps(passes * DATA_BYTES, reusedMs),
      };
    }
    // From the page cache each round takes a fraction of a second: three passes, so one
    // scheduling hiccup does not decide the figure.
    const hotReads = await measureReads(3, false);
    // A restore reads blocks written long ago, which are rarely still cached.
    const coldReads = dropPageCache() ? await measureReads(1, true) : undefined;

    for (let index = 0; index < 999; index += 1) {
      await call('POST', `${api}/buckets`, {
        token: device.token(),
        json: {
          name: `bucket-${String(index).padStart(4, '0')}`,
          type: 'interactive',
          storage_class: 'warm',
          initial_bucket_key_pem: newPem(),
        },
      });
    }
    const token = device.token();
    const listLatency = await latency(500, () => getReadingBody(`${api}/buckets`, token));
    const listed = await call('GET', `${api}/buckets`, { token });
    let previous: string | null = null;
    const pushLatency = await latency(200, async () => {
      const car = await metadataCar();
      const body = multipartBody([
        {
          name: 'request-data',
          contentType: 'application/json',
          body: JSON.stringify({
            bucket_id: listed.json[1].id,
            root_cid: car.root.toString(),
            metadata_cid: car.cid.toString(),
            expected_data_size: 0,
            previous_id: previous,
            valid_keys: [],
            deleted_block_cids: [],
          }),
        },
        { name: 'car-upload', contentType: 'application/vnd.ipld.car', body: car.car },
      ]);
      const response = await call('POST', `${api}/buckets/metadata`, {
        token,
        body: body.body,
        contentType: body.contentType,
      });
      previous = response.json?.id ?? null;
      return response.status;
    });
    const finalRss = peakRss(pid);
    await stopServerProcess(server, 'SIGTERM');

    const uploadRate = mbps(DATA_BYTES, uploadMs);
    const rawWriteRate = mbps(DATA_BYTES, rawWriteMs);
    const lines = [
      `server bench: ${DATA_BYTES / MiB} MiB of 1 MiB blocks in shards of ${BLOCKS_PER_SHARD} blocks, loopback; raw and service runs interleaved per shard`,
      `shard upload        ${uploadRate.toFixed(1)} MB/s   raw writeFile+fsync ${rawWriteRate.toFixed(1)} MB/s   ratio ${(uploadRate / rawWriteRate).toFixed(2)} (target >= 0.5)`,
      readLine(hotReads, 'page cache'),
      coldReads
        ? readLine(coldReads, 'cold: page cache dropped before each run')
        : 'blocks/car read     cold figure skipped: dropping the page cache needs root',
      `GET /buckets (${listed.json.length} buckets)  p50 ${listLatency.p50.toFixed(2)} ms   p99 ${listLatency.p99.toFixed(2)} ms (target p99 < 20 ms)`,
      `empty-data push     p50 ${pushLatency.p50.toFixed(2)} ms   p99 ${pushLatency.p99.toFixed(2)} ms (target p99 < 20 ms)`,
      `server peak RSS     ${(uploadRss / MiB).toFixed(0)} MB during upload, ${(finalRss / MiB).toFixed(0)} MB overall (target < 200 MB)`,
      await tinyBlockShard(workDir),
      blockSetBench(workDir),
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    rmSync(workDir, { recursive: true, force: true });
  }
}
