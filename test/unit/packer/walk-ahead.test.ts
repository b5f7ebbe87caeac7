import { describe, expect, it } from 'vitest';
import { WalkAhead } from '../../../main/packer/walk-ahead.ts';
import type { SourceEntry } from '../../../main/scanner/index.ts';

// The walk runs ahead so that large files start before the small ones walked before them are
// packed; entries still come out in walk order, and nothing starts beyond the limits.

function file(name: string, size: number): SourceEntry {
  return { kind: 'file', path: name, mode: 0o644, mtimeNs: 0n, ctimeNs: 0n, size, ino: 0n };
}

const LARGE = 1_000_000;

/** A walk over `entries` that records whether it was ended early. */
function walkOf(entries: readonly SourceEntry[]) {
  const state = { walked: 0, ended: false };
  async function* walk(): AsyncGenerator<SourceEntry> {
    try {
      for (const entry of entries) {
        state.walked += 1;
        await Promise.resolve();
        yield entry;
      }
    } finally {
      state.ended = true;
    }
  }
  return { walk: walk(), state };
}

/** Packings that settle only when told to, by entry path. */
function manualPackings() {
  const started: string[] = [];
  const finish = new Map<
    string,
    { resolve: (value: string) => void; reject: (e: Error) => void }
  >();
  const start = (entry: SourceEntry): Promise<string> | undefined => {
    if (entry.path.startsWith('skip')) return undefined;
    started.push(entry.path);
    return new Promise<string>((resolve, reject) => finish.set(entry.path, { resolve, reject }));
  };
  return { started, finish, start };
}

describe('WalkAhead', () => {
  it('starts large files as soon as they are walked, and gives every entry in walk order', async () => {
    const entries = [
      file('a', 1),
      file('b', 2),
      file('big1', LARGE),
      file('c', 3),
      file('big2', LARGE),
    ];
    const { walk } = walkOf(entries);
    const packings = manualPackings();
    const heard: string[] = [];
    const ahead = new WalkAhead(walk, {
      isEarly: (entry) => entry.kind === 'file' && entry.size >= LARGE,
      start: packings.start,
      aheadEntries: 100,
      atOnce: 4,
      onWalked: (entry) => heard.push(entry.path),
    });
    const first = await ahead.next();
    // Before the first small file is taken, both large files are under way, and every entry
    // walked was heard of (the small files' read ahead starts there), in walk order.
    expect(first?.entry.path).toBe('a');
    expect(packings.started).toEqual(['big1', 'big2']);
    expect(heard).toEqual(['a', 'b', 'big1', 'c', 'big2']);
    const order = [first?.entry.path];
    for (let item = await ahead.next(); item; item = await ahead.next()) {
      order.push(item.entry.path);
      if (item.early) {
        const started = await ahead.started(item);
        packings.finish.get(item.entry.path)?.resolve(`made ${item.entry.path}`);
        expect(await started?.made).toBe(`made ${item.entry.path}`);
      }
    }
    expect(order).toEqual(['a', 'b', 'big1', 'c', 'big2']);
    expect(ahead.inFlight.size).toBe(0);
  });

  it('runs no more than its limits: entries ahead, and large files at once', async () => {
    const entries = [
      file('small', 1),
      file('big1', LARGE),
      file('big2', LARGE),
      file('skip-big', LARGE),
      file('big3', LARGE),
      file('tail', 1),
    ];
    const { walk, state } = walkOf(entries);
    const packings = manualPackings();
    const ahead = new WalkAhead(walk, {
      isEarly: (entry) => entry.kind === 'file' && entry.size >= LARGE,
      start: packings.start,
      aheadEntries: 5,
      atOnce: 2,
    });
    const small = await ahead.next();
    expect(small?.entry.path).toBe('small');
    // Five entries walked, the sixth not yet; two of the three large ones started.
    expect(state.walked).toBe(5);
    expect(packings.started).toEqual(['big1', 'big2']);
    const big1 = await ahead.next();
    const big2 = await ahead.next();
    const skipped = await ahead.next();
    const big3 = await ahead.next();
    if (!big1 || !big2 || !skipped || !big3) throw new Error('entries missing');
    expect((await ahead.started(big1))?.made).toBeDefined();
    // big3 waits for room: big1 ends, the skipped one is passed over, and big3 starts.
    const waiting = ahead.started(big3);
    packings.finish.get('big1')?.resolve('done');
    expect(await waiting).not.toBeNull();
    expect(packings.started).toEqual(['big1', 'big2', 'big3']);
    expect(await ahead.started(skipped)).toBeNull();
    packings.finish.get('big2')?.resolve('done');
    packings.finish.get('big3')?.resolve('done');
    expect((await ahead.next())?.entry.path).toBe('tail');
    expect(await ahead.next()).toBeUndefined();
  });

  it('throws the failure of a large file to whoever waits for room, and starts nothing once closed', async () => {
    const entries = [
      file('big1', LARGE),
      file('big2', LARGE),
      file('big3', LARGE),
      file('x', 1),
      file('y', 1),
      file('z', 1),
    ];
    const { walk, state } = walkOf(entries);
    const packings = manualPackings();
    const ahead = new WalkAhead(walk, {
      isEarly: (entry) => entry.kind === 'file' && entry.size >= LARGE,
      start: packings.start,
      aheadEntries: 3,
      atOnce: 1,
    });
    const big1 = await ahead.next();
    const big2 = await ahead.next();
    if (!big1 || !big2) throw new Error('entries missing');
    const made = (await ahead.started(big1))?.made;
    void made?.catch(() => undefined);
    const waiting = ahead.started(big2);
    await ahead.close();
    packings.finish.get('big1')?.reject(new Error('disk full'));
    await expect(waiting).rejects.toThrow('disk full');
    // Closed: big2 was never started, and the walk was ended three entries ahead, before its
    // last two.
    expect(packings.started).toEqual(['big1']);
    expect(state.ended).toBe(true);
    expect(state.walked).toBe(4);
    expect(ahead.inFlight.size).toBe(0);
  });
  it('fails an entry whose start throws, for whoever waits for it, and leaves nothing unhandled', async () => {
    const entries = [file('big1', LARGE), file('gone1', LARGE), file('gone2', LARGE)];
    const { walk } = walkOf(entries);
    const packings = manualPackings();
    const ahead = new WalkAhead(walk, {
      isEarly: (entry) => entry.kind === 'file' && entry.size >= LARGE,
      start: (entry) => {
        // The disk went as the file was opened.
        if (entry.path.startsWith('gone')) throw new Error(`ENOTCONN: open ${entry.path}`);
        return packings.start(entry);
      },
      aheadEntries: 10,
      atOnce: 1,
    });
    const big1 = await ahead.next();
    const gone1 = await ahead.next();
    if (!big1 || !gone1) throw new Error('entries missing');
    // The gone files start, and fail, as big1 ends and makes room: from its end's callback.
    packings.finish.get('big1')?.resolve('done');
    expect(await (await ahead.started(big1))?.made).toBe('done');
    const started = await ahead.started(gone1);
    await expect(started?.made).rejects.toThrow('ENOTCONN: open gone1');
    await ahead.close();
  });
});
