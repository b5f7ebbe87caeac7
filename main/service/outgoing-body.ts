// A streamed request body as it leaves for the connection: counted there, and ended with its
// request.
//
// Counted there, after any pacing (transfer-rate-limit.ts): a body read ahead of the socket, and
// more so one an upload limit holds back, would count as sent what is still waiting (a 3 MB
// shard at 300 kB a second showed as sent at once, then stood still for 10 s).
//
// Ended with its request: Node's fetch (undici) goes on reading a streamed body to its end after
// the request failed or was stopped, sending it nowhere. A shard's body read so reads its source
// files to the end for nothing, and one paced by an upload limit kept a stopped backup from
// exiting for as long as the rest would have taken at the limit (19 s of a 3 MB shard at 100 kB
// a second), and would have spent the limit's pace against the retry it held back.

/**
 * `body`, whose bytes handed on so far are told to `onSent` after each chunk, and which ends once
 * `ended` fires: a read under way then fails, and `body` is cancelled, closing what it reads from.
 */
export function outgoingBody(
  body: ReadableStream<Uint8Array>,
  ended: AbortSignal,
  onSent?: (sentThisAttempt: number) => void,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  const cancelBody = (): void => {
    // Cancelling settles the read under way; a failure of the body's own cancel is of no
    // request any more.
    reader.cancel(ended.reason).catch(() => undefined);
  };
  ended.addEventListener('abort', cancelBody, { once: true });
  let sent = 0;
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        const read = await reader.read();
        if (ended.aborted) {
          controller.error(ended.reason);
          return;
        }
        if (read.done) {
          ended.removeEventListener('abort', cancelBody);
          controller.close();
          return;
        }
        controller.enqueue(read.value);
        sent += read.value.length;
        onSent?.(sent);
      },
      cancel: async (reason) => {
        ended.removeEventListener('abort', cancelBody);
        await reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}
