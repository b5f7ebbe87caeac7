import { isEngineError, type EngineError } from '../main/api/index.ts';

// Ctrl-C (SIGINT), a service manager's SIGTERM or a closed terminal's SIGHUP (an ssh session
// dropped, a terminal window closed) during a backup, a restore or a verify stops it through
// the engine's AbortSignal, so it ends as any failure ends: nothing half-written, its
// temporaries removed, and a line saying what to run next. Node's default for SIGHUP would end
// the process where it stood, leaving a restore's temporary copies in the user's folder until
// the next restore there. A second signal quits at once, for a user who will not wait (a kill,
// which the backup and restore also survive).

/** A stopped operation, with the exit code of the signal that stopped it (128 + its number). */
export class StoppedBySignal extends Error {
  constructor(
    readonly exitCode: number,
    readonly stopped: EngineError,
  ) {
    super(stopped.message, { cause: stopped });
    this.name = 'StoppedBySignal';
  }
}

const EXIT_CODES = { SIGHUP: 129, SIGINT: 130, SIGTERM: 143 } as const;
type StopSignal = keyof typeof EXIT_CODES;

/** Runs `work` with a signal that SIGHUP, SIGINT or SIGTERM fires; throws StoppedBySignal if one did. */
export async function untilSignalled<T>(work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  let received: StopSignal | undefined;
  const handlers = (Object.keys(EXIT_CODES) as StopSignal[]).map((name) => {
    const handler = (): void => {
      if (received !== undefined) process.exit(EXIT_CODES[received]);
      received = name;
      controller.abort(new Error(`${name} received`));
    };
    process.on(name, handler);
    return { name, handler };
  });
  try {
    return await work(controller.signal);
  } catch (error) {
    if (received !== undefined && isEngineError(error, 'stopped'))
      throw new StoppedBySignal(EXIT_CODES[received], error);
    throw error;
  } finally {
    for (const { name, handler } of handlers) process.off(name, handler);
  }
}
