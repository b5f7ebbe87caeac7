import type { Statement } from 'better-sqlite3';
import type { Db } from './database.ts';

// Prepared statements are cached per connection: preparing is far costlier than running.
const cache = new WeakMap<Db, Map<string, Statement>>();

export function sql<P extends unknown[] = unknown[], R = unknown>(
  db: Db,
  text: string,
): Statement<P, R> {
  let statements = cache.get(db);
  if (!statements) {
    statements = new Map();
    cache.set(db, statements);
  }
  let statement = statements.get(text);
  if (!statement) {
    statement = db.prepare(text);
    statements.set(text, statement);
  }
  return statement as Statement<P, R>;
}
