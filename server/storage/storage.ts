import type { Readable } from 'node:stream';

/** What a completed write leaves behind: where the bytes are and what they are. */
export interface StoredObject {
  key: string;
  size: number;
  sha256: string;
  /** The first bytes, enough to recognise the content type. */
  head: Buffer;
}

/** Inclusive byte offsets, as in a Range header. */
export interface ByteRange {
  start: number;
  end: number;
}

export interface StoredEntry {
  key: string;
  modifiedAt: Date;
}

/** A write went past its `maxBytes`; nothing of it was kept. */
export class ObjectTooLargeError extends Error {
  constructor(readonly maxBytes: number) {
    super(`The object is larger than ${maxBytes} bytes`);
  }
}

/** The storage has no room left (a full disk or quota); nothing of the write was kept. */
export class StorageFullError extends Error {
  constructor(options?: { cause: unknown }) {
    super('The attachment storage is full', options);
  }
}

/**
 * Where attachment bytes live (a directory, an S3 bucket). A write is all or nothing: it resolves
 * only once the bytes are durable, and leaves nothing behind when it fails. Keys are made by the
 * storage and are UUIDs.
 */
export interface AttachmentStorage {
  /** Streams `source` into storage; rejects with ObjectTooLargeError beyond `maxBytes`, StorageFullError when there is no room. */
  write(source: Readable, options: { maxBytes: number }): Promise<StoredObject>;
  /** The object's bytes, or a part of them; undefined when the object does not exist (deleted meanwhile). */
  open(key: string, range?: ByteRange): Promise<Readable | undefined>;
  /** Removes an object; removing a missing one is not an error. */
  remove(key: string): Promise<void>;
  /** Every stored object, for the orphan sweep. */
  list(): AsyncIterable<StoredEntry>;
  /** Removes partial writes (left by a crash) begun before `olderThan`; answers how many. */
  removeStaleWrites(olderThan: Date): Promise<number>;
  /** Lets go of connections; the storage is not used afterwards. */
  close(): Promise<void>;
}

export const STORAGE_KEY = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
