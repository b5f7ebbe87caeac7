import { mkdirSync, mkdtempSync, rmSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BUILD_INFO, BUILD_INPUTS, currentBuildOf } from '../../../bin/entry-point.js';

// Which code `canopy` runs: the build in dist/ only while it was made from the sources as they
// are, so that an edited source is never run as it was last built.

let root: string;
const HOUR_AGO = (Date.now() - 3_600_000) / 1000;

/** Writes `file` under the root with its modification time an hour ago. */
function writeOld(file: string, text = ''): void {
  const at = path.join(root, file);
  mkdirSync(path.dirname(at), { recursive: true });
  writeFileSync(at, text);
  utimesSync(at, HOUR_AGO, HOUR_AGO);
}

/** A build that started `secondsAgo` ago, with the entry compiled. */
function built(secondsAgo: number): void {
  writeOld('dist/cli/canopy.js');
  writeFileSync(
    path.join(root, BUILD_INFO),
    JSON.stringify({ startedAtMs: Date.now() - secondsAgo * 1000 }),
  );
}

beforeEach(() => {
  root = mkdtempSync(path.join(tmpdir(), 'canopy-entry-'));
  writeOld('cli/canopy.ts');
  writeOld('main/engine/engine.ts');
  writeOld('server/store/migrations/010-create-accounts.sql');
  writeOld('tsconfig.base.json');
  writeOld('bin/build.js');
  writeOld('package-lock.json');
  // The folders' own times too: adding a file to one is a change.
  for (const folder of [
    'cli',
    'main',
    'main/engine',
    'server',
    'server/store',
    'server/store/migrations',
    'bin',
  ]) {
    utimesSync(path.join(root, folder), HOUR_AGO, HOUR_AGO);
  }
});

afterEach(() => rmSync(root, { recursive: true, force: true }));

describe('the code a command runs', () => {
  it('is the build when no source changed since it started', () => {
    built(60);
    expect(currentBuildOf(root, 'cli/canopy.ts')).toBe(path.join(root, 'dist', 'cli', 'canopy.js'));
  });

  it('is the source once a source, a migration, the build, or the packages it bundles changed after the build started', () => {
    for (const changed of [
      'main/engine/engine.ts',
      'server/store/migrations/010-create-accounts.sql',
      'bin/build.js',
      'package-lock.json',
    ]) {
      built(60);
      writeFileSync(path.join(root, changed), 'edited');
      expect(currentBuildOf(root, 'cli/canopy.ts'), changed).toBeUndefined();
      utimesSync(path.join(root, changed), HOUR_AGO, HOUR_AGO);
    }
  });

  it('is the source once a file was added or removed after the build started', () => {
    built(60);
    writeFileSync(path.join(root, 'main', 'engine', 'added.ts'), '');
    unlinkSync(path.join(root, 'main', 'engine', 'added.ts'));
    expect(currentBuildOf(root, 'cli/canopy.ts')).toBeUndefined();
  });

  it('is the source when a source was saved just before the build started', () => {
    // A disk that keeps times to the second or two may date a save just after the start before it.
    const savedAt = (Date.now() - 10_500) / 1000;
    utimesSync(path.join(root, 'main', 'engine', 'engine.ts'), savedAt, savedAt);
    built(10);
    expect(currentBuildOf(root, 'cli/canopy.ts')).toBeUndefined();
  });

  it('is the source with no finished build, no compiled entry, or a build input missing', () => {
    expect(currentBuildOf(root, 'cli/canopy.ts'), 'never built').toBeUndefined();
    built(60);
    expect(currentBuildOf(root, 'server/cli.ts'), 'entry not compiled').toBeUndefined();
    writeFileSync(path.join(root, BUILD_INFO), '{"startedAtMs":');
    expect(currentBuildOf(root, 'cli/canopy.ts'), 'build info cut short').toBeUndefined();
    built(60);
    expect(BUILD_INPUTS).toContain('tsconfig.base.json');
    rmSync(path.join(root, 'tsconfig.base.json'));
    expect(currentBuildOf(root, 'cli/canopy.ts'), 'compiler settings gone').toBeUndefined();
  });
});
