import { randomBytes } from 'node:crypto';
import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

// The backup bench's data set (issue 4): 1 000 files of 1 MiB (photos), two of 100 MiB (videos)
// and 10 000 of 1 KiB (notes), all random, so that nothing in it is stored twice. `times` scales
// every count and the videos' size: 0.25 for a quicker run, 4 for the 4 GiB set whose peak RSS
// must stay what the 1 GiB set's is.

const MiB = 1 << 20;

/** Writes the data set under `dir` and returns its bytes. */
export function writeDataSet(dir: string, times: number): number {
  const oneMiBFiles = Math.round(1000 * times);
  const smallFiles = Math.round(10_000 * times);
  const bigBytes = Math.round(100 * MiB * times);
  let bytes = 0;
  for (let i = 0; i < oneMiBFiles; i += 1) {
    const folder = path.join(dir, 'photos', `d${i % 10}`);
    mkdirSync(folder, { recursive: true });
    writeFileSync(path.join(folder, `p${i}.jpg`), randomBytes(MiB));
    bytes += MiB;
  }
  mkdirSync(path.join(dir, 'video'), { recursive: true });
  for (let i = 0; i < 2; i += 1) {
    // Written a MiB at a time: a 100 MiB buffer would set the bench process's memory peak.
    const video = path.join(dir, 'video', `v${i}.mp4`);
    writeFileSync(video, new Uint8Array(0));
    for (let written = 0; written < bigBytes; written += MiB)
      appendFileSync(video, randomBytes(Math.min(MiB, bigBytes - written)));
    bytes += bigBytes;
  }
  for (let i = 0; i < smallFiles; i += 1) {
    const folder = path.join(dir, 'docs', `d${i % 100}`);
    mkdirSync(folder, { recursive: true });
    writeFileSync(path.join(folder, `n${i}.txt`), randomBytes(1024));
    bytes += 1024;
  }
  return bytes;
}

/** How many 1 MiB files (the photos) a data set of `times` holds. */
export function photoCount(times: number): number {
  return Math.round(1000 * times);
}
