import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { FileSecretStore } from '../main/identity/index.ts';
import { createEngine } from '../main/index.ts';
import { startLocalService } from '../cli/local-service.ts';

// One measured backup or restore, in a process of its own, as `canopy backup` and `canopy
// restore` run: the engine opens the enrolled home and starts the embedded service itself.
// Prints one JSON line: the time taken and the process's peak RSS. Run by backup-bench.ts,
// compiled: node dist/bench/measured-run.js backup|restore HOME BUCKET DIR

function peakRssMb(): number {
  const status = readFileSync('/proc/self/status', 'utf8');
  return Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1]) / 1024;
}

const [operation, home, bucket, dir] = process.argv.slice(2);
if ((operation !== 'backup' && operation !== 'restore') || !home || !bucket || !dir) {
  process.stderr.write('usage: measured-run.js backup|restore HOME BUCKET DIR\n');
  process.exit(2);
}
const engine = createEngine({ home, secrets: new FileSecretStore(home), startLocalService });
try {
  // The peak counts from here: module loading is part of any run, generating data is not.
  const start = performance.now();
  if (operation === 'backup') await engine.backup({ dir, bucket });
  else await engine.restore({ bucket, to: dir, overwrite: false });
  const ms = performance.now() - start;
  process.stdout.write(`${JSON.stringify({ ms, peakRssMb: peakRssMb() })}\n`);
} finally {
  await engine.close();
}
