// `npm run bench -- <suite>`: runs a benchmark suite and prints its figures.
import { runBackupBench } from './backup-bench.ts';
import { runServerBench } from './server-bench.ts';
import { runCommandStartBench } from './command-start-bench.ts';

const suites: Record<string, () => Promise<void> | void> = {
  server: runServerBench,
  backup: runBackupBench,
  start: runCommandStartBench,
};
const name = process.argv[2] ?? 'server';
const suite = suites[name];
if (!suite) {
  process.stderr.write(`unknown bench suite "${name}"; known: ${Object.keys(suites).join(', ')}\n`);
  process.exitCode = 2;
} else {
  await suite();
}
