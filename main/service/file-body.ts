import { open, type FileHandle } from 'node:fs/promises';

// A request body read from a file only as fast as the connection takes it. The previous body
// (a file stream → Readable.from → Readable.toWeb) queued up to 32 MiB per shard between the
// file and the socket, in object-mode buffers that ignore byte counts.

/** Bytes read per pull: one 1 MiB leaf, so a shard goes out in few, large writes. */
const CHUNK_BYTES = 1 << 20;

export function fileBody(file: string): ReadableStream<Uint8Array> {
  let handle: FileHandle | undefined;
  let cancelled = false;
  const closeFile = async (): Promise<void> => {
    const opened = handle;
    handle = undefined;
    await opened?.close();
  };
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          handle ??= await open(file, 'r');
          // Cancelled while the file was opening: close it here, or nothing would.
          if (cancelled) {
            await closeFile();
            return;
          }
          const chunk = Buffer.allocUnsafeSlow(CHUNK_BYTES);
          const { bytesRead } = await handle.read(chunk, 0, CHUNK_BYTES, null);
          if (bytesRead === 0) {
            await closeFile();
            controller.close();
            return;
          }
          controller.enqueue(chunk.subarray(0, bytesRead));
        } catch (error) {
          await closeFile();
          throw error;
        }
      },
      cancel: async () => {
        cancelled = true;
        await closeFile();
      },
    },
    // One chunk read ahead of the socket, no more.
    { highWaterMark: 1 },
  );
}
