import { afterAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  CACHE_TAG_NAME,
  CACHE_TAG_SIGNATURE,
  isTaggedCache,
  loadExcludeRules,
  walkSource,
} from '../../../main/scanner/index.ts';

// Folders tagged as caches (CACHEDIR.TAG) are left out of a walk with the rules, and told
// apart from folders that merely hold a file of that name.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'canopy-cache-folders-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Cargo's own tag: the signature, then a comment. */
const CARGO_TAG = `${CACHE_TAG_SIGNATURE}\n# This file is a cache directory tag created by cargo.\n`;

function folderWith(name: string, tag?: string): string {
  const folder = path.join(scratch, name);
  mkdirSync(folder, { recursive: true });
  writeFileSync(path.join(folder, 'data'), 'cached');
  if (tag !== undefined) writeFileSync(path.join(folder, CACHE_TAG_NAME), tag);
  return folder;
}

describe('cache folders', () => {
  it('are those holding a CACHEDIR.TAG that begins with the signature, as a regular file', () => {
    expect(isTaggedCache(folderWith('cargo-target', CARGO_TAG))).toBe(true);
    expect(isTaggedCache(folderWith('signature-alone', CACHE_TAG_SIGNATURE))).toBe(true);
    expect(isTaggedCache(folderWith('no-tag'))).toBe(false);
    expect(isTaggedCache(folderWith('empty-tag', ''))).toBe(false);
    expect(isTaggedCache(folderWith('cut-short', CACHE_TAG_SIGNATURE.slice(0, -1)))).toBe(false);
    expect(isTaggedCache(folderWith('other-words', 'Signature: not a cache\n'))).toBe(false);
    expect(isTaggedCache(folderWith('lower-case', CACHE_TAG_SIGNATURE.toLowerCase()))).toBe(false);
    // A link to a tag kept elsewhere, or a folder of the name, tags nothing.
    const linked = folderWith('linked-tag');
    writeFileSync(path.join(scratch, 'a-tag'), CARGO_TAG);
    symlinkSync(path.join(scratch, 'a-tag'), path.join(linked, CACHE_TAG_NAME));
    expect(isTaggedCache(linked)).toBe(false);
    const folderTag = folderWith('folder-tag');
    mkdirSync(path.join(folderTag, CACHE_TAG_NAME));
    expect(isTaggedCache(folderTag)).toBe(false);
    // A named pipe of the name is not waited on: opened without blocking, it is no tag.
    const pipeTag = folderWith('pipe-tag');
    expect(spawnSync('mkfifo', [path.join(pipeTag, CACHE_TAG_NAME)]).status).toBe(0);
    expect(isTaggedCache(pipeTag)).toBe(false);
    expect(isTaggedCache(path.join(scratch, 'not-there'))).toBe(false);
  });

  it('are left out of a walk with what they hold, unless a rule includes them again', async () => {
    const source = path.join(scratch, 'source');
    writeFileSync(path.join(folderWith('source/project/target', CARGO_TAG), 'app'), 'built');
    writeFileSync(path.join(folderWith('source/project'), 'main.rs'), 'fn main() {}');
    folderWith('source/notes/.pytest_cache', CARGO_TAG);
    folderWith('source/look-alike', 'Signature: 0\n');
    const walk = async (kept: readonly string[]) => {
      const found: string[] = [];
      const excluded: string[] = [];
      for await (const entry of walkSource(source, {
        rules: await loadExcludeRules(source, kept),
        onSkip: (item) => {
          throw new Error(`skipped ${item.path}: ${item.reason}`);
        },
        onExcluded: (relativePath) => excluded.push(relativePath),
      }))
        found.push(entry.path);
      return { found, excluded };
    };
    const byDefault = await walk([]);
    expect(byDefault.excluded).toEqual(['notes/.pytest_cache', 'project/target']);
    expect(byDefault.found).toEqual([
      'look-alike',
      `look-alike/${CACHE_TAG_NAME}`,
      'look-alike/data',
      'notes',
      'project',
      'project/data',
      'project/main.rs',
    ]);
    const rules = await loadExcludeRules(source);
    expect(rules.excludedBy('project/target', true)).toEqual({ from: 'cache-tag' });
    expect(rules.excludedBy('look-alike', true)).toBeUndefined();
    // Included again by name, one cache is walked like any folder; the other stays out.
    const kept = await walk(['!/project/target/']);
    expect(kept.excluded).toEqual(['notes/.pytest_cache']);
    expect(kept.found).toContain(`project/target/${CACHE_TAG_NAME}`);
    expect(kept.found).toContain('project/target/app');
    // The source folder itself is what the user chose: a tag in it leaves nothing out.
    const chosen = await walk([]);
    writeFileSync(path.join(source, CACHE_TAG_NAME), CARGO_TAG);
    const again = await walk([]);
    expect(again.found).toEqual([CACHE_TAG_NAME, ...chosen.found]);
  });
});
