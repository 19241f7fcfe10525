import { createHash } from 'node:crypto';
import { pipeline, Transform, type Readable } from 'node:stream';
import { ObjectTooLargeError, type StoredObject } from './storage.js';

/** file-type's own sample size: enough to recognise most formats. */
export const HEAD_BYTES = 4100;

/** Size, sha256 and first bytes of a stream, counted as the bytes pass; more than `maxBytes` fails. */
export class Tally {
  private readonly hash = createHash('sha256');
  private readonly head: Buffer[] = [];
  private headLength = 0;
  private size = 0;

  constructor(private readonly maxBytes: number) {}

  /** Counts one chunk and hands it back as a Buffer; throws ObjectTooLargeError past the limit. */
  add(data: unknown): Buffer {
    const chunk = Buffer.isBuffer(data) ? data : Buffer.from(String(data));
    this.size += chunk.length;
    if (this.size > this.maxBytes) throw new ObjectTooLargeError(this.maxBytes);
    this.hash.update(chunk);
    if (this.headLength < HEAD_BYTES) {
      const part = chunk.subarray(0, HEAD_BYTES - this.headLength);
      this.head.push(part);
      this.headLength += part.length;
    }
    return chunk;
  }

  /** `source` as a stream that counts what passes; an error on either side ends both. */
  through(source: Readable): Readable {
    const counter = new Transform({
      transform: (data: unknown, _encoding, done) => {
        try {
          done(null, this.add(data));
        } catch (error) {
          done(error instanceof Error ? error : new Error(String(error)));
        }
      },
    });
    return pipeline(source, counter, () => undefined);
  }

  /** Once the stream has ended: what was stored under `key`. */
  storedAs(key: string): StoredObject {
    return { key, size: this.size, sha256: this.hash.digest('hex'), head: Buffer.concat(this.head) };
  }
}
