import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { CANOPY_SCRIPT, canopyCommandLine } from '../test/helpers/canopy-command-line.ts';
import { buildDist } from './dist-build.ts';

// `npm run bench -- start`: how long a short `canopy` command takes, start to exit, and its peak
// RSS, run from the dist/ build and from the sources through tsx (CANOPY_FROM_SOURCE=1), on a
// home backed up to the embedded local service. Prints; asserts nothing.

const RUNS = Number(process.env['BENCH_START_RUNS'] ?? 7);

/** Writes the child's peak RSS (bytes) to its fd 3 as it exits. */
const REPORT_PEAK_RSS = `data:text/javascript,${encodeURIComponent(
  "import { writeSync } from 'node:fs'; process.on('exit', () => writeSync(3, String(process.resourceUsage().maxRSS * 1024)));",
)}`;

interface CommandRun {
  readonly ms: number;
  readonly peakRssBytes: number;
}

function runCanopy(home: string, args: readonly string[], fromSource: boolean): CommandRun {
  const canopy = canopyCommandLine();
  const start = performance.now();
  const child = spawnSync(
    process.execPath,
    [...canopy.flags, '--import', REPORT_PEAK_RSS, CANOPY_SCRIPT, ...args],
    {
      env: {
        ...process.env,
        ...canopy.env,
        CANOPY_HOME: home,
        CANOPY_SECRET_STORE: 'file',
        ...(fromSource ? { CANOPY_FROM_SOURCE: '1' } : {}),
      },
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
      encoding: 'utf8',
    },
  );
  const ms = performance.now() - start;
  if (child.status !== 0)
    throw new Error(`canopy ${args.join(' ')} exited with ${child.status}: ${child.stderr}`);
  return { ms, peakRssBytes: Number(child.output[3]) };
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? NaN;
}

export function runCommandStartBench(): void {
  buildDist();
  const work = mkdtempSync(path.join(os.tmpdir(), 'canopy-bench-start-'));
  try {
    const home = path.join(work, 'home');
    const source = path.join(work, 'source');
    mkdirSync(source);
    for (let i = 0; i < 100; i += 1) writeFileSync(path.join(source, `file-${i}.txt`), `${i}\n`);
    runCanopy(home, ['login', '--local', '--data', path.join(work, 'data')], false);
    runCanopy(home, ['buckets', 'create', 'B', '--type', 'backup', '--class', 'hot'], false);
    runCanopy(home, ['backup', source, '--bucket', 'B', '--skip-check'], false);
    const commands: readonly { readonly name: string; readonly args: readonly string[] }[] = [
      { name: '--help', args: ['--help'] },
      { name: 'whoami', args: ['whoami'] },
      { name: 'versions', args: ['versions', '--bucket', 'B'] },
      { name: 'ls', args: ['ls', '--bucket', 'B'] },
      { name: 'backup, unchanged', args: ['backup', source, '--bucket', 'B', '--skip-check'] },
    ];
    process.stdout.write(
      `canopy commands, start to exit, median of ${RUNS} runs (the embedded service, 100 files)\n`,
    );
    for (const { name, args } of commands) {
      const figures = [false, true].map((fromSource) => {
        const runs = Array.from({ length: RUNS }, () => runCanopy(home, args, fromSource));
        return {
          ms: median(runs.map((run) => run.ms)),
          rssMb: median(runs.map((run) => run.peakRssBytes)) / 1e6,
        };
      });
      const [built, source] = figures as [(typeof figures)[0], (typeof figures)[0]];
      process.stdout.write(
        `  ${name.padEnd(18)} built ${(built.ms / 1000).toFixed(2)} s, ${built.rssMb.toFixed(0)} MB peak; from source ${(source.ms / 1000).toFixed(2)} s, ${source.rssMb.toFixed(0)} MB peak\n`,
      );
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
