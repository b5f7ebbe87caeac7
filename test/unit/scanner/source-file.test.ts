import { spawnSync } from 'node:child_process';
import {
  closeSync,
  constants,
  mkdirSync,
  mkdtempSync,
  openSync,
  readSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readSmallFile } from '../../../main/packer/small-file.ts';
import {
  NotRegularFileError,
  openSourceFile,
  openSourceHandle,
} from '../../../main/scanner/index.ts';

// A name the walk saw as a regular file may be something else by the time it is read. A named
// pipe opened the plain way blocks until a writer comes, forever: each of these would hang the
// backup without the non-blocking open, and then fail the test on its timeout.

const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-source-file-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function fifo(name: string): string {
  const file = path.join(dir, name);
  const made = spawnSync('mkfifo', [file]);
  if (made.status !== 0) throw new Error(`mkfifo failed: ${String(made.stderr)}`);
  return file;
}

function thrownBy(open: () => unknown): unknown {
  try {
    open();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

describe('openSourceFile', () => {
  it('opens a regular file for reading', () => {
    const file = path.join(dir, 'plain.txt');
    writeFileSync(file, 'plain words');
    const fd = openSourceFile(file);
    try {
      const buffer = Buffer.alloc(32);
      expect(buffer.subarray(0, readSync(fd, buffer)).toString()).toBe('plain words');
    } finally {
      closeSync(fd);
    }
  });

  it('says what the name became: a named pipe, a folder, a device', () => {
    mkdirSync(path.join(dir, 'folder'));
    const kinds = [
      [fifo('pipe'), 'a named pipe'],
      [path.join(dir, 'folder'), 'a folder'],
      ['/dev/null', 'a device'],
    ] as const;
    for (const [file, kind] of kinds) {
      const error = thrownBy(() => openSourceFile(file));
      expect(error).toBeInstanceOf(NotRegularFileError);
      expect((error as NotRegularFileError).code).toBe('ENOTREGULAR');
      expect((error as Error).message).toBe(`it is now ${kind}, not a regular file`);
    }
  });

  it('does not follow a symbolic link, even to a regular file', () => {
    const target = path.join(dir, 'target.txt');
    writeFileSync(target, 'target');
    symlinkSync(target, path.join(dir, 'link.txt'));
    const error = thrownBy(() => openSourceFile(path.join(dir, 'link.txt')));
    expect((error as NodeJS.ErrnoException).code).toBe('ELOOP');
  });

  it('through the thread pool too, and follows a link only when asked', async () => {
    await expect(openSourceHandle(fifo('pool-pipe'))).rejects.toThrow(
      'it is now a named pipe, not a regular file',
    );
    const target = path.join(dir, 'rules.txt');
    writeFileSync(target, '*.log\n');
    symlinkSync(target, path.join(dir, 'rules-link'));
    await expect(openSourceHandle(path.join(dir, 'rules-link'))).rejects.toMatchObject({
      code: 'ELOOP',
    });
    const handle = await openSourceHandle(path.join(dir, 'rules-link'), { followLinks: true });
    try {
      expect(await handle.readFile('utf8')).toBe('*.log\n');
    } finally {
      await handle.close();
    }
  });
});

describe('readSmallFile of a name that became a pipe', () => {
  const scanned = { size: 5, mtimeNs: 0n, ctimeNs: 0n };
  const nothing = (): undefined => undefined;

  it('fails at once with no writer', async () => {
    await expect(readSmallFile(fifo('no-writer'), scanned, nothing)).rejects.toThrow(
      'it is now a named pipe',
    );
  });

  it('fails at once while a writer holds it open with nothing written', async () => {
    const file = fifo('idle-writer');
    // O_RDWR opens a pipe without waiting for the other end, and counts as a writer.
    const writer = openSync(file, constants.O_RDWR);
    try {
      await expect(readSmallFile(file, scanned, nothing)).rejects.toThrow('it is now a named pipe');
    } finally {
      closeSync(writer);
    }
  });
});
