// A reader that goes away before the output ends (`canopy ls -R | head`) ends what is written
// to it, not the command: the listing asked for was shown, and a backup whose progress went to a
// pipe closed part-way still stores its version. Without a listener, the EPIPE of the next write
// came back as an unhandled 'error' event: a stack trace after the lines asked for, and a backup
// stopped wherever it was. A terminal that hung up (an ssh session dropped) is a reader gone
// too: each write to it fails with EIO.

/** The codes of a write to an output whose reader is gone, and of every write after it. */
const READER_GONE = new Set(['EPIPE', 'EIO', 'ERR_STREAM_DESTROYED']);

/** Lets the command run on when `stream`'s reader goes away; any other error stays fatal. */
export function runOnWhenReaderGoes(stream: NodeJS.WriteStream): void {
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (READER_GONE.has(error.code ?? '')) return;
    throw error;
  });
}
