#!/usr/bin/env -S UV_THREADPOOL_SIZE=8 node --max-semi-space-size=4 --initial-old-space-size=64 --heap-growing-percent=50 --liftoff-only
// Runs the compiled engine when `npm run build` made it from the sources as they are, else the
// TypeScript sources through tsx, so the command works from a fresh clone without a build step
// (bin/entry-point.js).
//
// The young generation is capped at 4 MB semi-spaces (V8 grows them to 16 MB). A backup makes
// garbage at a steady rate, and the larger young generation only added to its peak memory: a
// backup of 400 000 files with one change peaked about 30 MB lower, and backups and restores of
// the 1.2 GiB bench set took the same time (bench/backup-bench.ts runs its measured backups and
// restores with these flags, read from this line).
//
// The old generation starts at 64 MB. V8 counts buffers allocated since its last full
// collection against the old generation's limit, and a small heap has a small limit: a restore
// (each 64 KiB the socket hands over is a new buffer) set off a full collection for about every
// 13 MB it received, some 100 in all, each marking the whole heap again. From 64 MB there were
// about 30: a restore of the bench set took about a tenth less time and a quarter less CPU
// time in JavaScript, and its peak memory rose by up to 30 MB (233 MB at most, measured).
// Backups took the same time.
//
// The old generation grows by half its live size after each full collection
// (--heap-growing-percent=50), where V8 would let it grow up to fourfold. A restore holds about
// 60 MB live but makes garbage steadily, and V8 let its heap reach some 220 MB before
// collecting: a restore of 340 000 small files peaked at 344-379 MB without this and
// 233-248 MB with it, one of 100 000 at 245 MB without and 174 MB with. Its CPU time stayed
// within the runs' spread (24-26 s without, 25-30 s with), and a first backup of those 340 000
// files took 26.7 s without and 27.3 s with.
//
// The thread pool has 8 threads, not libuv's 4. A restore writes and fsyncs 8 files at a time
// there, and an fsync holds its thread until the disk has the file: with 4, four fsyncs could
// hold the whole pool while the other files' writes waited. Restores of the bench set took
// 7.06-7.48 s against 7.40-8.56 s (six alternating runs each); backups took the same time.
// It is set on this line because libuv reads it once, when the pool first starts, and Node's
// module loader starts the pool before any script runs. A UV_THREADPOOL_SIZE of the user's own
// is overridden.
//
// WebAssembly stays compiled by Liftoff, V8's quick compiler (--liftoff-only). The only
// WebAssembly a command runs is undici's HTTP parser (llhttp), and V8 went on to compile its
// large parsing function again with TurboFan on a background thread, which a process must wait
// for before it exits, and which took some 35 MB: short commands that spoke to the service took
// 0.79-1.02 s with this flag against 0.93-1.38 s without, and peaked at 88-95 MB against
// 126-132 MB (npm run bench -- start: whoami, versions, ls, an unchanged backup). The parser
// only counts its way past a response's body, so the optimized code bought nothing measurable:
// restores of a 400 MB file took 2.23-2.41 s with this flag against 2.31-2.63 s without.
import { importEntry } from './entry-point.js';

// Typed in a folder deleted under the shell, the command moves to `/` first: on Node 20 neither
// tsx's loader nor a worker thread starts in a deleted working folder (each fails on uv_cwd).
// The mark tells cli/working-folder.ts that a relative path there goes from nowhere, not `/`.
try {
  process.cwd();
} catch (error) {
  if (error.code !== 'ENOENT') throw error;
  process.chdir('/');
  globalThis[Symbol.for('canopy.typedInDeletedFolder')] = true;
}

const { main } = await importEntry('cli/canopy.ts');
process.exitCode = await main(process.argv.slice(2));
