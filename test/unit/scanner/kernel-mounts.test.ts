import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { EngineError } from '../../../main/api/index.ts';
import {
  checkSourceFolder,
  walkSource,
  type SkippedItem,
  type SourceEntry,
} from '../../../main/scanner/index.ts';

// The kernel's own file systems mounted inside a source (/proc and /sys in a backup of `/`) are
// not walked: their mount points are kept as empty folders and named among what was passed
// over, which leaves a backup's exit status as it was. Other file systems mounted there (a disk,
// a tmpfs) are walked as before. A source that is itself such a file system is refused.
// Mounting needs root, as every test run here has.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-kernel-mounts-'));
const mounted: string[] = [];
afterAll(() => {
  for (const dir of mounted.reverse()) execFileSync('umount', [dir]);
  rmSync(scratch, { recursive: true, force: true });
});

function mount(type: string, dir: string): void {
  mkdirSync(dir, { recursive: true });
  execFileSync('mount', ['-t', type, type, dir]);
  mounted.push(dir);
}

async function walked(
  root: string,
  ahead: boolean,
): Promise<{ paths: string[]; skipped: SkippedItem[] }> {
  const entries: SourceEntry[] = [];
  const skipped: SkippedItem[] = [];
  for await (const entry of walkSource(root, { ahead, onSkip: (item) => skipped.push(item) }))
    entries.push(entry);
  return { paths: entries.map((entry) => entry.path), skipped };
}

const root = path.join(scratch, 'root');
beforeAll(() => {
  mkdirSync(path.join(root, 'etc'), { recursive: true });
  writeFileSync(path.join(root, 'etc', 'hostname'), 'laptop\n');
  mount('proc', path.join(root, 'proc'));
  mount('sysfs', path.join(root, 'sys'));
  // The kernel's device nodes: devtmpfs, with tmpfs's statfs magic number.
  mount('devtmpfs', path.join(root, 'dev'));
  // The mount table writes a space in a path as \040.
  mount('devtmpfs', path.join(scratch, 'dev with spaces'));
  mount('tmpfs', path.join(root, 'tmp'));
  writeFileSync(path.join(root, 'tmp', 'draft.txt'), 'kept');
});

describe('a walk over mounted file systems', () => {
  it.each([false, true])(
    'keeps /proc, /sys and /dev as empty folders, names them, and walks other mounts (ahead: %s)',
    async (ahead) => {
      const { paths, skipped } = await walked(root, ahead);
      expect(paths).toEqual(['dev', 'etc', 'etc/hostname', 'proc', 'sys', 'tmp', 'tmp/draft.txt']);
      expect(skipped).toEqual([
        {
          path: 'dev',
          reason:
            "the kernel's devtmpfs file system is mounted there, whose entries are not files: kept as an empty folder",
          kind: 'special',
        },
        {
          path: 'proc',
          reason:
            "the kernel's proc file system is mounted there, whose entries are not files: kept as an empty folder",
          kind: 'special',
        },
        {
          path: 'sys',
          reason:
            "the kernel's sysfs file system is mounted there, whose entries are not files: kept as an empty folder",
          kind: 'special',
        },
      ]);
    },
  );

  it('finds nothing to walk in a kernel file system itself (an excluded /proc, measured)', async () => {
    expect(await walked(path.join(root, 'proc'), false)).toEqual({ paths: [], skipped: [] });
  });

  it('refuses a source in a kernel file system', () => {
    expect(() => checkSourceFolder(path.join(root, 'proc', 'self'))).toThrow(EngineError);
    expect(() => checkSourceFolder(path.join(root, 'sys'))).toThrow(
      `${path.join(root, 'sys')} is in the kernel's sysfs file system, which holds no files to back up`,
    );
    expect(() => checkSourceFolder(path.join(root, 'dev'))).toThrow(
      `${path.join(root, 'dev')} is in the kernel's devtmpfs file system, which holds no files to back up`,
    );
    expect(() => checkSourceFolder(path.join(scratch, 'dev with spaces'))).toThrow(
      "is in the kernel's devtmpfs file system",
    );
    expect(() => checkSourceFolder(path.join(root, 'tmp'))).not.toThrow();
  });
});
