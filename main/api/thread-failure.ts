/**
 * A worker thread's own failure (its `error` event: a thread that could not start, one that
 * crashed), as the engine passes it on to what waited on the thread. It is not the failure of
 * the file the thread was reading: it carries no errno `code`, so that no caller takes it for
 * one (ENOENT, "deleted before it was read") and leaves that file out of a version. It fails
 * the work instead, since every file after would meet it as well.
 */
export class ThreadFailure extends Error {
  constructor(work: string, error: unknown) {
    super(`the thread ${work} stopped: ${reasonOf(error)}`, { cause: error });
    this.name = 'ThreadFailure';
  }
}

function reasonOf(error: unknown): string {
  const failure = error as NodeJS.ErrnoException | undefined;
  // Node 20 starts no worker thread in a working folder deleted under the process.
  if (failure?.code === 'ENOENT' && failure.syscall === 'uv_cwd')
    return 'no thread can start while the folder this process runs in is deleted';
  return error instanceof Error ? error.message : String(error);
}
