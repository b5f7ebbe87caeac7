// A request body that ends when its request has: Node's fetch (undici) goes on reading a
// streamed body to its end after the request failed or was stopped, sending it nowhere. A
// shard's body read so reads its source files to the end for nothing, and one paced by an upload
// limit (upload-rate-limit.ts) kept a stopped backup from exiting for as long as the rest would
// have taken at the limit (19 s of a 3 MB shard at 100 kB a second), and would have spent the
// limit's pace on the retry it held back.

/**
 * `body`, which ends once `ended` fires: a read under way then fails, and `body` is cancelled,
 * closing what it reads from.
 */
export function cutOffBy(
  body: ReadableStream<Uint8Array>,
  ended: AbortSignal,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  const cancelBody = (): void => {
    // Cancelling settles the read under way; a failure of the body's own cancel is of no
    // request any more.
    reader.cancel(ended.reason).catch(() => undefined);
  };
  ended.addEventListener('abort', cancelBody, { once: true });
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
      },
      cancel: async (reason) => {
        ended.removeEventListener('abort', cancelBody);
        await reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}
