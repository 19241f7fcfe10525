import { randomUUID } from 'node:crypto';
import { mkdir, open, opendir, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import {
  STORAGE_KEY,
  StorageFullError,
  type AttachmentStorage,
  type ByteRange,
  type StoredEntry,
  type StoredObject,
} from './storage.js';
import { Tally } from './tally.js';

const PARTIAL_SUFFIX = '.partial';

/** What the filesystem says when it has no room: no space left on the device, or the disk quota reached. */
const isNoSpace = (error: unknown): boolean =>
  error instanceof Error && 'code' in error && (error.code === 'ENOSPC' || error.code === 'EDQUOT');

async function writeFully(handle: FileHandle, chunk: Buffer): Promise<void> {
  for (let offset = 0; offset < chunk.length;) {
    const { bytesWritten } = await handle.write(chunk, offset);
    offset += bytesWritten;
  }
}

/** Makes a rename inside `dir` durable; platforms that cannot open a directory skip it. */
async function syncDirectory(dir: string): Promise<void> {
  let handle: FileHandle | undefined;
  try {
    handle = await open(dir, 'r');
    await handle.sync();
  } catch (error) {
    const code = error instanceof Error && 'code' in error ? error.code : undefined;
    if (code !== 'EISDIR' && code !== 'EPERM' && code !== 'EINVAL') throw error;
  } finally {
    await handle?.close();
  }
}

/**
 * Attachments as files: `objects/<key>` holds the bytes, `tmp/` the writes in progress. Both are
 * on the same filesystem, so a finished write is fsynced and renamed into place atomically.
 */
export async function fileSystemStorage(root: string): Promise<AttachmentStorage> {
  const objects = path.join(root, 'objects');
  const tmp = path.join(root, 'tmp');
  await mkdir(objects, { recursive: true, mode: 0o700 });
  await mkdir(tmp, { recursive: true, mode: 0o700 });

  const objectPath = (key: string): string => {
    // Keys come from the database; a path must never be built from anything else.
    if (!STORAGE_KEY.test(key)) throw new Error(`Not a storage key: ${JSON.stringify(key)}`);
    return path.join(objects, key);
  };

  return {
    async write(source: Readable, { maxBytes }): Promise<StoredObject> {
      const key = randomUUID();
      const partial = path.join(tmp, `${key}${PARTIAL_SUFFIX}`);
      const handle = await open(partial, 'wx', 0o600);
      const tally = new Tally(maxBytes);
      let closed = false;
      try {
        // A failed write leaves the source as it is: destroying it would report the storage's failure
        // as the request's own (an upload refused as a malformed body, not a full disk).
        for await (const data of source.iterator({ destroyOnReturn: false })) {
          await writeFully(handle, tally.add(data));
        }
        await handle.sync();
        closed = true;
        await handle.close();
        await rename(partial, objectPath(key));
        await syncDirectory(objects);
        return tally.storedAs(key);
      } catch (error) {
        if (!closed) await handle.close().catch(() => undefined);
        await rm(partial, { force: true });
        throw isNoSpace(error) ? new StorageFullError({ cause: error }) : error;
      }
    },

    async open(key: string, range?: ByteRange): Promise<Readable | undefined> {
      const handle = await open(objectPath(key), 'r').catch((error: unknown) => {
        if (error instanceof Error && 'code' in error && error.code === 'ENOENT') return undefined;
        throw error;
      });
      return handle?.createReadStream(range ? { start: range.start, end: range.end } : {});
    },

    async remove(key: string): Promise<void> {
      await rm(objectPath(key), { force: true });
    },

    async *list(): AsyncIterable<StoredEntry> {
      for await (const entry of await opendir(objects)) {
        if (!entry.isFile() || !STORAGE_KEY.test(entry.name)) continue;
        const info = await stat(path.join(objects, entry.name)).catch(() => undefined);
        if (info) yield { key: entry.name, modifiedAt: info.mtime };
      }
    },

    async removeStaleWrites(olderThan: Date): Promise<number> {
      let removed = 0;
      for await (const entry of await opendir(tmp)) {
        if (!entry.isFile() || !entry.name.endsWith(PARTIAL_SUFFIX)) continue;
        const file = path.join(tmp, entry.name);
        const info = await stat(file).catch(() => undefined);
        if (info && info.mtime < olderThan) {
          await rm(file, { force: true });
          removed++;
        }
      }
      return removed;
    },

    close: () => Promise.resolve(),
  };
}
