import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { chmodSync, mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startLocalService } from '../../cli/local-service.ts';
import { FileSecretStore } from '../../main/identity/index.ts';
import { createEngine, type Engine, type EngineDeps } from '../../main/index.ts';
import { integrityOf } from '../helpers/database-integrity.ts';
import type { FaultProxy } from '../helpers/fault-proxy.ts';
import { runHelper } from '../helpers/helper-process.ts';
import { startProxiedService } from '../helpers/proxied-service.ts';
import { seededBytes } from '../helpers/seeded-random.ts';
import { writeSettled } from '../helpers/settled-file.ts';
import { stagedLeftovers } from '../helpers/staged-shards.ts';
import type { TestService } from '../helpers/test-service.ts';
import { treeStateOf } from '../helpers/tree-fingerprint.ts';

// A model-based test (fast-check commands): files written, rewritten, renamed, chmodded and
// deleted, and symbolic links made and pointed elsewhere; backups that finish and backups
// killed (kill -9, the embedded service with them) after a random delay or once their version
// is pushed, before or after its first shard is confirmed; versions deleted, the
// active one among them, and pruned; versions restored. Each backup, deletion, prune and restore
// opens the engine afresh, as a command would, and so starts the service on its data again.
// The model is what each version must restore to: the folder as a finished backup found it, or,
// for a version a killed backup stored (or a later backup finished), the folder as one of the
// killed backups found it, never a mix. At the end a backup that runs to its end must leave no
// upload pending and nothing staged, every version left must restore as the model says and read
// back whole, and both databases must be whole.
//
// The same steps run against the embedded service, and against a server of its own behind a
// network that fails a tenth of requests (500, 503, 429, a reset, or an answer lost after the
// server carried the request out): there a killed backup leaves its version pending on a server
// that lives on, cut off mid-request.
//
// The steps are drawn from MODEL_SEED (MODEL_RUNS sequences of up to 16 steps); a failure prints
// the steps that failed, to run again with that seed.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-model-based-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const seed = Number(process.env['MODEL_SEED'] ?? 20261203);
const runs = Number(process.env['MODEL_RUNS'] ?? 10);
/** Sequences against a server behind a faulty network: slower, for the retries' waits. */
const faultyRuns = Number(process.env['MODEL_RUNS'] ?? 5);

/** The bucket test/helpers/crashing-backup.ts backs up to. */
const BUCKET = 'Crash';
/** The names the steps use: files at the top, in a folder, and one folder further down. */
const NAMES = ['a.bin', 'b.txt', 'docs/c.bin', 'docs/deep/d.bin', 'docs/deep/e.txt'];
/** Where the steps put symbolic links, and what they point at: a file, a folder, nothing. */
const LINKS = ['link', 'docs/deep/link'];
const LINK_TARGETS = ['a.bin', '../b.txt', 'nowhere', '/tmp', '.'];
const MiB = 1024 * 1024;

/** The steps run, by kind, to tell what a seed exercised. */
const ran = new Map<string, number>();
function tally(kind: string): void {
  ran.set(kind, (ran.get(kind) ?? 0) + 1);
}

interface Model {
  /** The files the folder holds now. */
  readonly files: Set<string>;
  /** The versions finished backups made, each with the folder as its backup found it. */
  readonly versions: Map<string, string>;
  /** The folder as each killed backup found it when it started. */
  readonly killedStates: Set<string>;
}

/**
 * The service the steps back up to: the embedded one, started by each engine on its own data,
 * or a server of its own, behind a network that fails some requests.
 */
interface Target {
  /** What each engine is made with, beside its home and secret store. */
  readonly deps: Pick<EngineDeps, 'startLocalService' | 'retry'>;
  /** Logs a fresh home in, as a new user. */
  enroll(engine: Engine): Promise<void>;
  /** The service's database, for the home `home`. */
  serviceDatabase(home: string): string;
}

interface Real {
  readonly target: Target;
  readonly home: string;
  readonly source: string;
  /** Numbers the folders restores write to. */
  restores: number;
}

async function withEngine<T>(real: Real, action: (engine: Engine) => Promise<T>): Promise<T> {
  const engine = createEngine({
    home: real.home,
    secrets: new FileSecretStore(real.home),
    ...real.target.deps,
  });
  try {
    return await action(engine);
  } finally {
    await engine.close();
  }
}

/** The versions the service lists, but for those still being uploaded. */
async function storedVersions(engine: Engine): Promise<string[]> {
  const versions = await engine.listVersions({ bucket: BUCKET });
  return versions.filter((version) => version.state !== 'pending').map((version) => version.id);
}

/** The stored version a step's `pick` names, counting round the list; none when it is empty. */
async function pickedVersion(engine: Engine, pick: number): Promise<string | undefined> {
  const stored = await storedVersions(engine);
  return stored[pick % Math.max(stored.length, 1)];
}

/** What `id` may restore to: as the model knows it, or as a killed backup found the folder. */
function expectedStates(model: Model, id: string): ReadonlySet<string> {
  const found = model.versions.get(id);
  return found === undefined ? model.killedStates : new Set([found]);
}

/** Restores version `id` to a folder of its own and checks it against the model. */
async function restoreAndCompare(
  engine: Engine,
  model: Model,
  real: Real,
  id: string,
): Promise<void> {
  const target = path.join(path.dirname(real.home), `restored-${(real.restores += 1)}`);
  await engine.restore({ bucket: BUCKET, version: id, to: target, overwrite: false });
  const restored = treeStateOf(target);
  tally('restores');
  rmSync(target, { recursive: true, force: true });
  expect(expectedStates(model, id).has(restored), `version ${id} restores as it was found`).toBe(
    true,
  );
}

class WriteFile implements fc.AsyncCommand<Model, Real> {
  constructor(
    private readonly name: string,
    private readonly size: number,
    private readonly bytesSeed: number,
  ) {}
  check(): boolean {
    return true;
  }
  run(model: Model, real: Real): Promise<void> {
    // Written as if a minute ago: a rewrite at the same size is caught by its ctime alone.
    tally('writes');
    writeSettled(path.join(real.source, this.name), seededBytes(this.bytesSeed, this.size));
    model.files.add(this.name);
    return Promise.resolve();
  }
  toString(): string {
    return `write ${this.name} (${this.size} bytes, seed ${this.bytesSeed})`;
  }
}

/**
 * The file of the folder a step's `pick` names, counting round its files in order; none when
 * it holds none. A step drawn before it runs names one that is there, whatever came before.
 */
function pickedFile(model: Readonly<Model>, pick: number): string | undefined {
  const files = [...model.files].sort();
  return files[pick % Math.max(files.length, 1)];
}

class DeleteFile implements fc.AsyncCommand<Model, Real> {
  constructor(private readonly pick: number) {}
  check(model: Readonly<Model>): boolean {
    return model.files.size > 0;
  }
  run(model: Model, real: Real): Promise<void> {
    const name = pickedFile(model, this.pick) as string;
    tally('deletions');
    rmSync(path.join(real.source, name));
    model.files.delete(name);
    return Promise.resolve();
  }
  toString(): string {
    return `delete file #${this.pick}`;
  }
}

class RenameFile implements fc.AsyncCommand<Model, Real> {
  constructor(
    private readonly pick: number,
    private readonly to: string,
  ) {}
  check(model: Readonly<Model>): boolean {
    const from = pickedFile(model, this.pick);
    return from !== undefined && from !== this.to;
  }
  run(model: Model, real: Real): Promise<void> {
    const from = pickedFile(model, this.pick) as string;
    const to = path.join(real.source, this.to);
    mkdirSync(path.dirname(to), { recursive: true });
    tally('renames');
    // Over a file of that name, if there is one, as mv does.
    renameSync(path.join(real.source, from), to);
    model.files.delete(from);
    model.files.add(this.to);
    return Promise.resolve();
  }
  toString(): string {
    return `rename file #${this.pick} to ${this.to}`;
  }
}

class ChangeMode implements fc.AsyncCommand<Model, Real> {
  constructor(
    private readonly pick: number,
    private readonly mode: number,
  ) {}
  check(model: Readonly<Model>): boolean {
    return model.files.size > 0;
  }
  run(model: Model, real: Real): Promise<void> {
    // Only its ctime tells the next backup: size and mtime stay.
    tally('mode changes');
    chmodSync(path.join(real.source, pickedFile(model, this.pick) as string), this.mode);
    return Promise.resolve();
  }
  toString(): string {
    return `chmod ${this.mode.toString(8)} file #${this.pick}`;
  }
}

class MakeLink implements fc.AsyncCommand<Model, Real> {
  constructor(
    private readonly name: string,
    private readonly target: string,
  ) {}
  check(): boolean {
    return true;
  }
  run(_model: Model, real: Real): Promise<void> {
    // Stored as a link, not followed: one to itself ('.') or to nothing included.
    tally('links made');
    const link = path.join(real.source, this.name);
    rmSync(link, { force: true });
    mkdirSync(path.dirname(link), { recursive: true });
    symlinkSync(this.target, link);
    return Promise.resolve();
  }
  toString(): string {
    return `link ${this.name} to ${this.target}`;
  }
}

class Backup implements fc.AsyncCommand<Model, Real> {
  check(): boolean {
    return true;
  }
  async run(model: Model, real: Real): Promise<void> {
    const state = treeStateOf(real.source);
    const result = await withEngine(real, (engine) =>
      engine.backup({ dir: real.source, bucket: BUCKET, allowEmpty: true }),
    );
    expect(result.skipped).toEqual([]);
    tally(result.unchanged ? 'backups with nothing new' : 'backups');
    if (result.resumedVersionId !== null) {
      tally('killed uploads finished');
      expect(model.killedStates.size, 'a killed backup left an upload to finish').toBeGreaterThan(
        0,
      );
    }
    // No new version: the active one must already be the folder as it is.
    if (result.unchanged)
      expect(expectedStates(model, result.versionId).has(state), 'unchanged since').toBe(true);
    model.versions.set(result.versionId, state);
  }
  toString(): string {
    return 'backup';
  }
}

class KilledBackup implements fc.AsyncCommand<Model, Real> {
  constructor(
    /** Killed after this long, wherever it is then (or it finishes first)... */
    private readonly delayMs: number | undefined,
    /** ...or at this point of test/helpers/crashing-backup.ts, if it gets there. */
    private readonly point = 'read:1000000000',
  ) {}
  check(): boolean {
    return true;
  }
  async run(model: Model, real: Real): Promise<void> {
    model.killedStates.add(treeStateOf(real.source));
    const backup = runHelper('crashing-backup', [real.home, real.source, this.point]);
    const timer =
      this.delayMs === undefined
        ? undefined
        : setTimeout(() => backup.child.kill('SIGKILL'), this.delayMs);
    const { code, signal } = await backup.exited;
    clearTimeout(timer);
    tally(signal === 'SIGKILL' ? 'backups killed' : 'backups done before their kill');
    if (signal !== 'SIGKILL' && code !== 0)
      throw new Error(`the backup failed on its own (${code}):\n${backup.output()}`);
  }
  toString(): string {
    return this.delayMs === undefined
      ? `backup killed at ${this.point}`
      : `backup killed after ${this.delayMs} ms`;
  }
}

class DeleteVersion implements fc.AsyncCommand<Model, Real> {
  constructor(private readonly pick: number) {}
  check(): boolean {
    return true;
  }
  async run(model: Model, real: Real): Promise<void> {
    await withEngine(real, async (engine) => {
      const id = await pickedVersion(engine, this.pick);
      if (id === undefined) return;
      await engine.deleteVersion({ bucket: BUCKET, version: id });
      tally('versions deleted');
      model.versions.delete(id);
      expect(await storedVersions(engine)).not.toContain(id);
    });
  }
  toString(): string {
    return `delete stored version #${this.pick}`;
  }
}

class PruneVersions implements fc.AsyncCommand<Model, Real> {
  constructor(private readonly keepLast: number) {}
  check(): boolean {
    return true;
  }
  async run(model: Model, real: Real): Promise<void> {
    await withEngine(real, async (engine) => {
      const before = await engine.listVersions({ bucket: BUCKET });
      const active = before.find((version) => version.state === 'active');
      const { removed } = await engine.pruneVersions({
        bucket: BUCKET,
        policy: { last: this.keepLast },
        dryRun: false,
      });
      tally('prunes');
      for (const version of removed) model.versions.delete(version.id);
      const left = await storedVersions(engine);
      for (const version of removed) expect(left).not.toContain(version.id);
      // The active version always stays, whatever the rules.
      if (active) expect(left).toContain(active.id);
    });
  }
  toString(): string {
    return `prune keeping the last ${this.keepLast}`;
  }
}

class RestoreVersion implements fc.AsyncCommand<Model, Real> {
  constructor(private readonly pick: number) {}
  check(): boolean {
    return true;
  }
  async run(model: Model, real: Real): Promise<void> {
    await withEngine(real, async (engine) => {
      const id = await pickedVersion(engine, this.pick);
      if (id !== undefined) await restoreAndCompare(engine, model, real, id);
    });
  }
  toString(): string {
    return `restore stored version #${this.pick}`;
  }
}

const name = fc.constantFrom(...NAMES);
const size = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: 0, max: 20_000 }) },
  { weight: 1, arbitrary: fc.constantFrom(MiB, MiB + 1, 2 * MiB + 7) },
);
const write = fc
  .tuple(name, size, fc.integer({ min: 1, max: 1_000_000 }))
  .map(([file, bytes, bytesSeed]) => new WriteFile(file, bytes, bytesSeed));
const backup = fc.constant(new Backup());
// Writes and backups twice as often as the rest, so that versions pile up between deletions.
const steps = [
  write,
  write,
  fc.nat(8).map((pick) => new DeleteFile(pick)),
  fc.tuple(fc.nat(8), name).map(([pick, to]) => new RenameFile(pick, to)),
  fc
    .tuple(fc.nat(8), fc.constantFrom(0o600, 0o644, 0o755, 0o400))
    .map(([pick, mode]) => new ChangeMode(pick, mode)),
  fc
    .tuple(fc.constantFrom(...LINKS), fc.constantFrom(...LINK_TARGETS))
    .map(([link, target]) => new MakeLink(link, target)),
  backup,
  backup,
  // The process takes about 0.7 s to start, and a backup of these files about as long again;
  // its upload takes a few milliseconds, which a kill at a random time hardly ever meets, so
  // some are killed once their version is pushed, before or after its first shard.
  fc.oneof(
    fc.integer({ min: 300, max: 1800 }).map((delayMs) => new KilledBackup(delayMs)),
    fc.constantFrom('shard:0', 'shard:1').map((point) => new KilledBackup(undefined, point)),
  ),
  fc.nat(8).map((pick) => new DeleteVersion(pick)),
  fc.integer({ min: 1, max: 3 }).map((keepLast) => new PruneVersions(keepLast)),
  fc.nat(8).map((pick) => new RestoreVersion(pick)),
];

/** After the steps: a backup to its end, then every version left against the model. */
async function finalCheck(model: Model, real: Real): Promise<void> {
  await new Backup().run(model, real);
  await withEngine(real, async (engine) => {
    const versions = await engine.listVersions({ bucket: BUCKET });
    expect(versions.filter((version) => version.state === 'pending')).toEqual([]);
    for (const version of versions) {
      await restoreAndCompare(engine, model, real, version.id);
      expect(await engine.verify({ bucket: BUCKET, version: version.id, all: true })).toMatchObject(
        { unavailable: [] },
      );
    }
  });
  expect(stagedLeftovers(real.home)).toEqual([]);
  expect(integrityOf(path.join(real.home, 'state.sqlite'))).toBe('ok');
  expect(integrityOf(real.target.serviceDatabase(real.home))).toBe('ok');
}

let made = 0;

async function setup(target: Target): Promise<{ model: Model; real: Real }> {
  const run = path.join(scratch, `run-${(made += 1)}`);
  const real: Real = {
    target,
    home: path.join(run, 'home'),
    source: path.join(run, 'source'),
    restores: 0,
  };
  mkdirSync(real.source, { recursive: true });
  writeSettled(path.join(real.source, NAMES[0] as string), seededBytes(made, 5000));
  await withEngine(real, async (engine) => {
    await target.enroll(engine);
    await engine.createBucket({ name: BUCKET, type: 'backup', storageClass: 'hot' });
  });
  const model: Model = {
    files: new Set([NAMES[0] as string]),
    versions: new Map(),
    killedStates: new Set(),
  };
  return { model, real };
}

/** Runs `runs` sequences of steps from `seed` against `target`, each from a fresh home. */
async function runSequences(target: Target, runs: number): Promise<void> {
  ran.clear();
  await fc.assert(
    fc.asyncProperty(fc.commands(steps, { maxCommands: 16, size: 'max' }), async (commands) => {
      const { model, real } = await setup(target);
      await fc.asyncModelRun(() => Promise.resolve({ model, real }), commands);
      await finalCheck(model, real);
      rmSync(path.dirname(real.home), { recursive: true, force: true });
    }),
    // Most steps start the engine, and a killed backup a process of its own; shrinking would
    // run the sequence many times over, so a failure ends the run and prints its steps as they
    // were.
    { seed, numRuns: runs, endOnFailure: true },
  );
  console.log(
    `MODEL_SEED=${seed}: ${[...ran].map(([kind, count]) => `${count} ${kind}`).join(', ')}`,
  );
}

describe('edits, backups killed or not, versions deleted and restores, in any order', () => {
  it(`restore every version as the model says: ${runs} sequences from MODEL_SEED=${seed}`, async () => {
    await runSequences(
      {
        deps: { startLocalService },
        enroll: async (engine) => {
          await engine.loginLocal({});
        },
        serviceDatabase: (home) => path.join(home, 'local-server', 'service.sqlite'),
      },
      runs,
    );
  }, 600_000);

  describe('on a server of its own, through a network that fails a tenth of requests', () => {
    let service: TestService;
    let proxy: FaultProxy;
    beforeAll(async () => {
      // Block fetches and shard uploads go through the proxy too: it is the storage host.
      ({ service, proxy } = await startProxiedService());
      proxy.randomFaults(0.1, seed, { lostAnswers: true });
    });
    afterAll(async () => {
      await proxy.close();
      await service.close();
    });

    // A killed backup is cut off from a server that lives on, mid-request, and leaves its
    // version pending there; the faults answer 500, 503, 429 with Retry-After, or reset.
    it(`restore every version as the model says: ${faultyRuns} sequences from MODEL_SEED=${seed}`, async () => {
      await runSequences(
        {
          deps: { retry: { attempts: 8, baseDelayMs: 10, maxDelayMs: 200 } },
          enroll: async (engine) => {
            const { code } = service.addUser(`model-${made}@example.org`);
            await engine.login({ server: proxy.url, code });
          },
          serviceDatabase: () => path.join(service.dataDir, 'service.sqlite'),
        },
        faultyRuns,
      );
      expect(proxy.injected(), 'faults were injected').toBeGreaterThan(0);
    }, 600_000);
  });
});
