import { EngineError, isDiskFull } from '../api/index.ts';
import type { Engine } from './engine.ts';

// The Canopy home holds the state database, the staging folder and the metadata cache; any
// request may write there. A full disk under it would otherwise reach the user as SQLite's
// "database or disk is full" or a bare ENOSPC, with a stack. It is mapped here, for every
// request, in one place. Errors already mapped (a full restore target, a full service) pass.

function homeDiskFull(error: unknown, home: string): unknown {
  if (error instanceof EngineError || !isDiskFull(error)) return error;
  return new EngineError(
    'disk_full',
    `not enough free space in ${home}, where Canopy keeps its state; free some space and run it again`,
    { cause: error },
  );
}

/** Opens the engine (its state database) and reports a full home disk as `disk_full`. */
export function withHomeDiskFull(open: () => Engine, home: string): Engine {
  let engine: Engine;
  try {
    engine = open();
  } catch (error) {
    throw homeDiskFull(error, home);
  }
  return new Proxy(engine, {
    get(target, key, receiver) {
      const value: unknown = Reflect.get(target, key, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]): unknown => {
        try {
          const result: unknown = Reflect.apply(value, target, args);
          return result instanceof Promise
            ? result.catch((error: unknown) => {
                throw homeDiskFull(error, home);
              })
            : result;
        } catch (error) {
          throw homeDiskFull(error, home);
        }
      };
    },
  });
}
