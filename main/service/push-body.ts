import { randomBytes } from 'node:crypto';
import { MEDIA_CAR, MEDIA_JSON, PART_CAR_UPLOAD, PART_REQUEST_DATA } from '../protocol/index.ts';
import { fileBody } from './file-body.ts';

// A push's multipart body (§10.1), with its metadata CAR read from a file as the connection
// takes it, and where the CAR begins in it, so that the client counts the CAR's bytes as sent
// (outgoing-body.ts). FormData sends a file's Blob just as well, but says nothing of how far it
// got: a CAR of a large tree is megabytes (15 MB for 100 000 files), minutes over a slow link,
// during which a backup would seem to stand still.

export interface PushBody {
  readonly stream: ReadableStream<Uint8Array>;
  readonly contentType: string;
  /** The whole body's length, known before it is sent. */
  readonly length: number;
  /** Where the CAR's bytes begin in the body. */
  readonly carStart: number;
}

export function pushBody(
  requestData: string,
  car: {
    readonly file: string;
    /** The CAR file's size. */
    readonly bytes: number;
  },
): PushBody {
  const boundary = `canopy-${randomBytes(12).toString('hex')}`;
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="${PART_REQUEST_DATA}"\r\n` +
      `Content-Type: ${MEDIA_JSON}\r\n\r\n${requestData}\r\n` +
      `--${boundary}\r\nContent-Disposition: form-data; name="${PART_CAR_UPLOAD}"\r\n` +
      `Content-Type: ${MEDIA_CAR}\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const reader = fileBody(car.file).getReader();
  let headSent = false;
  const stream = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        if (!headSent) {
          headSent = true;
          controller.enqueue(head);
          return;
        }
        const read = await reader.read();
        if (!read.done) {
          controller.enqueue(read.value);
          return;
        }
        controller.enqueue(tail);
        controller.close();
      },
      // The file closes with the body: a request cut off, or a backup stopped, leaves none open.
      cancel: (reason) => reader.cancel(reason),
    },
    { highWaterMark: 1 },
  );
  return {
    stream,
    contentType: `multipart/form-data; boundary=${boundary}`,
    length: head.length + car.bytes + tail.length,
    carStart: head.length,
  };
}
