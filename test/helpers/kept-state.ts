import { readdirSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';

// What a Canopy home keeps of its buckets, read beside the engine or the CLI that uses it: the
// state database, opened to read only, and the cached metadata CARs.

/** What `read` finds in the state database of the Canopy home `home`, opened to read only. */
export function fromState<T>(home: string, read: (state: Database.Database) => T): T {
  const state = new Database(path.join(home, 'state.sqlite'), { readonly: true });
  try {
    return read(state);
  } finally {
    state.close();
  }
}

/** Rows of bucket `id` in some of the tables of `home`'s state that keep something per bucket. */
export function keptRowsOf(
  home: string,
  id: string,
): { buckets: number; fileIndex: number; versions: number; active: number } {
  return fromState(home, (state) => {
    const count = (table: string, column = 'bucket_id'): number =>
      state
        .prepare<[string], number>(`SELECT count(*) FROM ${table} WHERE ${column} = ?`)
        .pluck()
        .get(id) ?? 0;
    return {
      buckets: count('buckets', 'id'),
      fileIndex: count('file_index_sources'),
      versions: count('known_versions'),
      active: count('known_active_versions'),
    };
  });
}

/** Where in the secret store `home`'s state says bucket `id`'s key is; null when it says none. */
export function bucketKeyAccountOf(home: string, id: string): string | null {
  return fromState(
    home,
    (state) =>
      state
        .prepare<[string], string | null>('SELECT bucket_key_account FROM buckets WHERE id = ?')
        .pluck()
        .get(id) ?? null,
  );
}

/** The metadata CARs cached in `home`. */
export function cachedCarsOf(home: string): string[] {
  return readdirSync(path.join(home, 'metadata')).filter((name) => name.endsWith('.car'));
}

/** What the metadata cache of `home` holds (CARs, the indexes of their nodes), its tag aside. */
export function cachedFilesOf(home: string): string[] {
  return readdirSync(path.join(home, 'metadata'))
    .filter((name) => name !== 'CACHEDIR.TAG')
    .sort();
}
