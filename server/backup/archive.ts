import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { once } from 'node:events';
import { pipeline } from 'node:stream/promises';
import { createGunzip, createGzip } from 'node:zlib';
import tar from 'tar-stream';
import { z } from 'zod';
import { OperatorError } from '../operator-error.js';
import { STORAGE_KEY } from '../storage/storage.js';

/** A backup that cannot be made or restored, said in one line. */
export class BackupError extends OperatorError {}

export const FORMAT = 'task-service-backup';
export const FORMAT_VERSION = 1;

// Entries, in this order: the tables (parents first), the attachments' bytes, then the manifest
// (written last: it carries the counts and checksums of everything before it).
export const MANIFEST_ENTRY = 'manifest.json';
export const tableEntry = (table: string): string => `tables/${table}.copy`;
export const attachmentEntry = (key: string): string => `attachments/${key}`;

const Sha256Schema = z.string().regex(/^[0-9a-f]{64}$/);

export const ManifestSchema = z.object({
  format: z.literal(FORMAT),
  formatVersion: z.literal(FORMAT_VERSION),
  createdAt: z.string(),
  serviceVersion: z.string(),
  postgresVersion: z.string(),
  /** The schema's migration level: the migrations applied to the dumped database, in order. */
  migrations: z.array(z.string()),
  /** The dumped server's next transaction id: event log positions (and cursors given out) lie below it. */
  nextTransactionId: z.string().regex(/^\d+$/),
  /** Each table's rows in PostgreSQL's COPY text format, parents before children. */
  tables: z.array(
    z.object({
      name: z.string(),
      columns: z.array(z.string()),
      rows: z.number().int().nonnegative(),
      bytes: z.number().int().nonnegative(),
      sha256: Sha256Schema,
    }),
  ),
  sequences: z.array(z.object({ name: z.string(), lastValue: z.string().regex(/^-?\d+$/), isCalled: z.boolean() })),
  attachments: z.array(
    z.object({ key: z.string().regex(STORAGE_KEY), size: z.number().int().nonnegative(), sha256: Sha256Schema }),
  ),
});
export type Manifest = z.infer<typeof ManifestSchema>;

export function parseManifest(text: string): Manifest {
  const header = z.object({ format: z.string(), formatVersion: z.number() }).safeParse(JSON.parse(text));
  if (!header.success || header.data.format !== FORMAT)
    throw new BackupError('The archive is not a backup of this service (its manifest is not one)');
  if (header.data.formatVersion !== FORMAT_VERSION) {
    throw new BackupError(
      `The archive is in backup format ${header.data.formatVersion}; this version reads format ${FORMAT_VERSION}: restore it with the version that made it`,
    );
  }
  const manifest = ManifestSchema.safeParse(JSON.parse(text));
  if (!manifest.success)
    throw new BackupError(
      `The archive's manifest is damaged: ${manifest.error.issues[0]?.path.join('.')} ${manifest.error.issues[0]?.message}`,
    );
  return manifest.data;
}

/** A gzip-compressed tar file written entry by entry; it appears under its name only once complete. */
export class ArchiveWriter {
  private readonly pack = tar.pack();
  private readonly written: Promise<void>;

  constructor(file: string) {
    this.written = pipeline(this.pack, createGzip(), createWriteStream(file, { mode: 0o600 }));
    // Surfaced by close(); without a listener here a failure would be unhandled meanwhile.
    this.written.catch(() => undefined);
  }

  /** Adds one entry of exactly `size` bytes; resolves with the sha256 of what was written. */
  async add(name: string, size: number, source: AsyncIterable<Buffer>): Promise<string> {
    const hash = createHash('sha256');
    const entryDone = new Promise<void>((resolve, reject) => {
      const entry = this.pack.entry({ name, size, mode: 0o600, mtime: new Date(), type: 'file' }, (error) =>
        error ? reject(error) : resolve(),
      );
      void (async () => {
        for await (const chunk of source) {
          hash.update(chunk);
          if (!entry.write(chunk)) await once(entry, 'drain');
        }
        entry.end(null);
      })().catch((error: unknown) => {
        entry.destroy(error instanceof Error ? error : new Error(String(error)));
        reject(error);
      });
    });
    await Promise.race([entryDone, this.written]);
    return hash.digest('hex');
  }

  async close(): Promise<void> {
    this.pack.finalize();
    await this.written;
  }

  abort(): void {
    this.pack.destroy();
  }
}

/** The chunks of a tar entry (a streamx stream, typed as unknown) as Buffers. */
async function* bytesOf(source: AsyncIterable<unknown>): AsyncIterable<Buffer> {
  for await (const chunk of source) yield Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk));
}

/** A failure of the caller's handling of an entry, as opposed to one of reading the file. */
class EntryFailure extends Error {
  constructor(override readonly cause: unknown) {
    super('entry handler failed');
  }
}

/**
 * Reads every entry of an archive in order, handing each to `onEntry`, which must consume its
 * stream. A damaged file (bad gzip, a cut tar) fails with a BackupError.
 */
export async function readArchive(
  file: string,
  onEntry: (name: string, size: number, content: AsyncIterable<Buffer>) => Promise<void>,
): Promise<void> {
  const extract = tar.extract();
  let readFailure: unknown;
  const reading = pipeline(createReadStream(file), createGunzip(), extract);
  reading.catch((error: unknown) => (readFailure ??= error));
  try {
    for await (const entry of extract) {
      if (entry.header.type !== 'file') {
        entry.resume();
        continue;
      }
      await onEntry(entry.header.name, entry.header.size, bytesOf(entry)).catch((error: unknown) => {
        throw new EntryFailure(error);
      });
      entry.resume(); // whatever onEntry left unread
    }
    await reading;
  } catch (error) {
    // An entry's stream fails when the file does: then the file's failure is the one to tell.
    if (error instanceof EntryFailure && readFailure === undefined) throw error.cause;
    const failure = readFailure ?? error;
    const reason = failure instanceof Error ? failure.message : String(failure);
    throw new BackupError(`${file} is not a readable backup archive (${reason})`);
  }
}
