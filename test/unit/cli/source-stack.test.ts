import { afterAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { spawnSync } from 'node:child_process';
import { build } from 'esbuild';
import { sourceStack } from '../../../cli/source-stack.ts';

// An unexpected failure's stack names the places in the sources, as bin/build.js bundles them,
// and leaves a place without a source map as it is.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-source-stack-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('an unexpected failure told', () => {
  it('names the line in the source for a bundled file, and leaves other places as they are', async () => {
    const sources = path.join(scratch, 'main');
    mkdirSync(sources);
    writeFileSync(
      path.join(sources, 'deep.ts'),
      [
        'export function deep(): never {',
        "  const why: string = 'a bug';",
        '  throw new Error(why);',
        '}',
      ].join('\n'),
    );
    writeFileSync(
      path.join(sources, 'entry.ts'),
      [
        "import { deep } from './deep.ts';",
        'export function entry(): never {',
        '  return deep();',
        '}',
      ].join('\n'),
    );
    // As bin/build.js does: bundled, with a map beside each file.
    await build({
      entryPoints: [path.join(sources, 'entry.ts')],
      outdir: path.join(scratch, 'dist'),
      bundle: true,
      format: 'esm',
      platform: 'node',
      sourcemap: true,
      logLevel: 'silent',
    });
    const bundled = path.join(scratch, 'dist', 'entry.js');
    // Thrown in a process of its own: this one (vitest's) maps stacks by itself.
    const thrown = spawnSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `const { entry } = await import(${JSON.stringify(pathToFileURL(bundled).href)});
         try { entry(); } catch (error) { process.stdout.write(error.stack); }`,
      ],
      { encoding: 'utf8' },
    );
    const stack = thrown.stdout;
    expect(stack).toContain(`${pathToFileURL(bundled).href}:`);

    const told = sourceStack(stack);
    expect(told).toMatch(new RegExp(`at deep \\(${path.join(sources, 'deep.ts')}:3:\\d+\\)`));
    expect(told).toMatch(new RegExp(`at entry \\(${path.join(sources, 'entry.ts')}:3:\\d+\\)`));
    expect(told).not.toContain(bundled);
    // No map beside it: as it was.
    const elsewhere = '    at thing (file:///nowhere/at-all.js:10:5)';
    expect(sourceStack(elsewhere)).toBe(elsewhere);
  });
});
