import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
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
/** A table, column or sequence name as the schema's migrations write them. */
const IdentifierSchema = z.string().regex(/^[a-z_][a-z0-9_]{0,62}$/);
const Count = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);

/**
 * A restore spends transaction ids one by one up to the archive's next one (transaction-ids.ts):
 * beyond 2^31 it would run for hours and cross the 32-bit counter's wraparound on a fresh server.
 */
export const MAX_NEXT_TRANSACTION_ID = 2n ** 31n;
const INT64 = { min: -(2n ** 63n), max: 2n ** 63n - 1n };
// Bounds that no schema of this service comes near, so that a crafted manifest cannot ask for more.
const MAX_TABLES = 1_000;
const MAX_SEQUENCES = 1_000;
const MAX_MIGRATIONS = 10_000;

const unique = <T>(items: T[], key: (item: T) => string) => new Set(items.map(key)).size === items.length;

export const ManifestSchema = z.object({
  format: z.literal(FORMAT),
  formatVersion: z.literal(FORMAT_VERSION),
  createdAt: z.string().datetime(),
  serviceVersion: z.string().max(100),
  postgresVersion: z.string().max(200),
  /** The schema's migration level: the migrations applied to the dumped database, in order. */
  migrations: z
    .array(z.string().regex(/^[0-9A-Za-z_-]{1,200}$/))
    .max(MAX_MIGRATIONS)
    .refine((names) => unique(names, (name) => name), 'names a migration twice'),
  /** The dumped server's next transaction id: event log positions (and cursors given out) lie below it. */
  nextTransactionId: z
    .string()
    .regex(/^\d{1,19}$/)
    .refine((id) => BigInt(id) <= MAX_NEXT_TRANSACTION_ID, `is above ${MAX_NEXT_TRANSACTION_ID}`),
  /** Each table's rows in PostgreSQL's COPY text format, parents before children, in the order of their entries. */
  tables: z
    .array(
      z
        .object({
          name: IdentifierSchema,
          columns: z
            .array(IdentifierSchema)
            .min(1)
            .max(1_600) // PostgreSQL's limit
            .refine((columns) => unique(columns, (c) => c), 'names a column twice'),
          rows: Count,
          bytes: Count,
          sha256: Sha256Schema,
        })
        // COPY ends every row with a newline.
        .refine((table) => table.rows <= table.bytes, { message: 'is more than the bytes hold', path: ['rows'] }),
    )
    .max(MAX_TABLES)
    .refine((tables) => unique(tables, (t) => t.name), 'names a table twice'),
  sequences: z
    .array(
      z.object({
        name: IdentifierSchema,
        lastValue: z
          .string()
          .regex(/^-?\d{1,19}$/)
          .refine((value) => BigInt(value) >= INT64.min && BigInt(value) <= INT64.max, 'is not a 64-bit integer'),
        isCalled: z.boolean(),
      }),
    )
    .max(MAX_SEQUENCES)
    .refine((sequences) => unique(sequences, (s) => s.name), 'names a sequence twice'),
  /** In the order of their entries: by key, ascending. */
  attachments: z
    .array(z.object({ key: z.string().regex(STORAGE_KEY), size: Count, sha256: Sha256Schema }))
    .refine(
      (attachments) => attachments.every((a, i) => i === 0 || (attachments[i - 1]?.key ?? '') < a.key),
      'are not in ascending order of their keys, each once',
    ),
});
export type Manifest = z.infer<typeof ManifestSchema>;

/**
 * The most a manifest may take for the entries before it: a fixed part (format, versions,
 * migrations, sequences) and a part per entry, with room to spare for the dump's pretty-printing.
 * So a manifest cannot ask for memory that the archive's own entries do not account for.
 */
export const manifestLimit = (tables: number, attachments: number): number =>
  512 * 1024 + 16 * 1024 * tables + 512 * attachments;

const RANGE_ISSUES = new Set(['too_big', 'too_small', 'custom']);

export function parseManifest(text: string): Manifest {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new BackupError("The archive's manifest is not JSON: the archive is damaged or not a backup of this service");
  }
  const header = z.object({ format: z.string(), formatVersion: z.number() }).safeParse(json);
  if (!header.success || header.data.format !== FORMAT)
    throw new BackupError('The archive is not a backup of this service (its manifest is not one)');
  if (header.data.formatVersion !== FORMAT_VERSION) {
    throw new BackupError(
      `The archive is in backup format ${header.data.formatVersion}; this version reads format ${FORMAT_VERSION}: restore it with the version that made it`,
    );
  }
  const manifest = ManifestSchema.safeParse(json);
  if (!manifest.success) {
    const issue = manifest.error.issues[0];
    const what = issue && RANGE_ISSUES.has(issue.code) ? 'out of range' : 'damaged';
    throw new BackupError(`The archive's manifest is ${what}: ${issue?.path.join('.')} ${issue?.message}`);
  }
  return manifest.data;
}

/** A gzip-compressed tar file written entry by entry into `file` (an open file, closed when the writing ends). */
export class ArchiveWriter {
  private readonly pack = tar.pack();
  private readonly written: Promise<void>;

  constructor(file: FileHandle) {
    this.written = pipeline(this.pack, createGzip(), file.createWriteStream({ flush: true })).catch(
      (error: unknown) => {
        throw new BackupError(`Writing the archive failed: ${describe(error)}`);
      },
    );
    // Surfaced by add() and close(); without a listener here a failure would be unhandled meanwhile.
    this.written.catch(() => undefined);
  }

  /** Adds one entry of exactly `size` bytes; resolves with the sha256 of what was written. */
  async add(name: string, size: number, source: AsyncIterable<Buffer>): Promise<string> {
    const hash = createHash('sha256');
    let settle: (error?: Error | null) => void = () => undefined;
    const entryDone = new Promise<void>((resolve, reject) => {
      settle = (error) => (error ? reject(error) : resolve());
    });
    const entry = this.pack.entry({ name, size, mode: 0o600, mtime: new Date(), type: 'file' }, (error) =>
      settle(error),
    );
    // The archive's failure is said by what add() rejects with; the entry's own 'error' is the same one.
    entry.on('error', () => undefined);
    entryDone.catch(() => undefined);
    try {
      for await (const chunk of source) {
        hash.update(chunk);
        if (!entry.write(chunk)) await Promise.race([once(entry, 'drain'), this.written]);
      }
      entry.end(null);
      await Promise.race([entryDone, this.written]);
    } catch (error) {
      this.abort();
      throw error;
    }
    return hash.digest('hex');
  }

  /** Ends the archive and makes its bytes durable (the file is flushed, then closed). */
  async close(): Promise<void> {
    this.pack.finalize();
    await this.written;
  }

  /** Stops writing; the file is the caller's to remove. */
  abort(): void {
    this.pack.destroy();
  }
}

const describe = (error: unknown) =>
  error instanceof Error
    ? 'code' in error && typeof error.code === 'string'
      ? error.code
      : error.message
    : String(error);

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

export interface EntryHeader {
  name: string;
  size: number;
  /** `file` for every entry a dump writes. */
  type: string;
}

/**
 * Reads every entry of an archive in order, handing each to
 * `onEntry`, which must consume its stream. A damaged file (bad gzip, a cut tar) fails with a
 * BackupError; `stop` (a stop signal) ends the reading at once.
 */
export async function readArchive(
  file: string,
  onEntry: (header: EntryHeader, content: AsyncIterable<Buffer>) => Promise<void>,
  stop?: AbortSignal,
): Promise<void> {
  const extract = tar.extract();
  let readFailure: unknown;
  const reading = pipeline(createReadStream(file), createGunzip(), extract, ...(stop ? [{ signal: stop }] : []));
  reading.catch((error: unknown) => (readFailure ??= error));
  try {
    for await (const entry of extract) {
      const header = { name: entry.header.name, size: entry.header.size ?? 0, type: entry.header.type ?? 'file' };
      await onEntry(header, bytesOf(entry)).catch((error: unknown) => {
        throw new EntryFailure(error);
      });
      entry.resume(); // whatever onEntry left unread
    }
    await reading;
  } catch (error) {
    if (stop?.aborted) throw error instanceof EntryFailure ? error.cause : error;
    // An entry's stream fails when the file does: then the file's failure is the one to tell.
    if (error instanceof EntryFailure && readFailure === undefined) throw error.cause;
    const failure = readFailure ?? error;
    const reason = failure instanceof Error ? failure.message : String(failure);
    throw new BackupError(`${file} is not a readable backup archive (${reason})`);
  }
}
