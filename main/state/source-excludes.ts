import type { StateDb } from './database.ts';

// The exclude rules a user keeps in Canopy for a source folder (gitignore lines, in order),
// applied after Canopy's defaults and before the folder's own .canopyignore.

/** The rules kept for `sourceDir` (an absolute path); none when it has none. */
export function sourceExcludesOf(db: StateDb, sourceDir: string): string[] {
  const row = db
    .prepare<[string], { rules: string }>('SELECT rules FROM source_excludes WHERE source_dir = ?')
    .get(sourceDir);
  if (!row) return [];
  const rules: unknown = JSON.parse(row.rules);
  if (!Array.isArray(rules) || !rules.every((rule) => typeof rule === 'string'))
    throw new Error(`the exclude rules kept for ${sourceDir} are not a list of lines`);
  return rules;
}

/** Keeps `rules` for `sourceDir`, replacing what was kept; none removes the row. */
export function keepSourceExcludes(db: StateDb, sourceDir: string, rules: readonly string[]): void {
  if (rules.length === 0) {
    db.prepare('DELETE FROM source_excludes WHERE source_dir = ?').run(sourceDir);
    return;
  }
  db.prepare(
    `INSERT INTO source_excludes (source_dir, rules) VALUES (?, ?)
     ON CONFLICT (source_dir) DO UPDATE SET rules = excluded.rules`,
  ).run(sourceDir, JSON.stringify(rules));
}

/** Every folder rules are kept for, as its path was given. */
export function excludedSourceDirs(db: StateDb): string[] {
  return db
    .prepare<[], string>('SELECT source_dir FROM source_excludes ORDER BY source_dir')
    .pluck()
    .all();
}
