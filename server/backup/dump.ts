import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import type pg from 'pg';
import { to as copyTo } from 'pg-copy-streams';
import { z } from 'zod';
import { checkedRows } from '../db/checked-rows.js';
import { tables } from '../db/query.js';
import { clientSession } from '../db/sql.js';
import { PROJECT_ROOT } from '../project-root.js';
import type { AttachmentStorage } from '../storage/storage.js';
import {
  ArchiveWriter,
  attachmentEntry,
  BackupError,
  FORMAT,
  FORMAT_VERSION,
  MANIFEST_ENTRY,
  tableEntry,
  type Manifest,
} from './archive.js';
import { createArchiveFile } from './archive-file.js';
import { MIGRATIONS_TABLE, quoteIdent, sequenceStates, serviceTables, type TableShape } from './catalog.js';
import { digestOf } from './entries.js';
import { RESTORE_MARKER_TABLE, UnfinishedRestoreError } from './restore-marker.js';
import { BackupStopped, connect, disconnect, stoppedBy } from './stopping.js';

export async function serviceVersion(): Promise<string> {
  const text = await readFile(path.join(PROJECT_ROOT, 'package.json'), 'utf8');
  const version: unknown = JSON.parse(text).version;
  return typeof version === 'string' ? version : 'unknown';
}

type Table = Manifest['tables'][number];

/** The attachments in the order of their entries, which a restore checks: by key, byte by byte. */
const STORED_ATTACHMENTS = tables
  .selectFrom('attachments')
  .select(['storage_key as key', 'size', 'sha256'])
  .orderBy('storage_key', (order) => order.collate('C'));

/** A row of `SELECT to_regclass(…) IS NOT NULL AS exists`. */
const Exists = z.object({ exists: z.boolean() });

const copyOut = (client: pg.Client, table: TableShape) =>
  client.query(copyTo(`COPY ${quoteIdent(table.name)} (${table.columns.map(quoteIdent).join(', ')}) TO STDOUT`));

/**
 * One table's rows, in COPY text format, into the archive. An entry's size comes before its bytes,
 * and nothing of the rows may be kept outside the archive: the table is read twice in the same
 * snapshot, first only counted, then written; both readings must agree.
 */
async function addTable(archive: ArchiveWriter, client: pg.Client, table: TableShape): Promise<Table> {
  const counted = await digestOf(copyOut(client, table));
  const sha256 = await archive.add(tableEntry(table.name), counted.bytes, copyOut(client, table));
  if (sha256 !== counted.sha256)
    throw new BackupError(`Table ${table.name} read differently twice in one snapshot: run the dump again`);
  return { name: table.name, columns: table.columns, rows: counted.rows, bytes: counted.bytes, sha256 };
}

/** Every table, then the sequences and the attachments' list, read in one snapshot of the database. */
async function addSnapshot(
  archive: ArchiveWriter,
  url: string,
  stop: AbortSignal | undefined,
): Promise<Omit<Manifest, 'createdAt'>> {
  const client = await connect(url, stop);
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    await client.query('SET LOCAL statement_timeout = 0');
    // Both readings of a table must see its rows in the same order: no scan joining another midway.
    await client.query('SET LOCAL synchronize_seqscans = off');
    const history = await checkedRows(client, Exists, 'SELECT to_regclass($1) IS NOT NULL AS exists', [
      quoteIdent(MIGRATIONS_TABLE),
    ]);
    if (!history[0]?.exists)
      throw new BackupError('The database has no schema of this service yet: there is nothing to dump');
    const marked = await checkedRows(client, Exists, 'SELECT to_regclass($1) IS NOT NULL AS exists', [
      quoteIdent(RESTORE_MARKER_TABLE),
    ]);
    if (marked[0]?.exists) throw new UnfinishedRestoreError();
    // The migration runner's own table, no model (server/db/migrate.ts).
    const migrations = await checkedRows(
      client,
      z.object({ name: z.string() }),
      `SELECT name FROM ${quoteIdent(MIGRATIONS_TABLE)} ORDER BY name`,
    );
    const meta = await checkedRows(
      client,
      z.object({ next: z.string(), version: z.string() }),
      `SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS next, current_setting('server_version') AS version`,
    );
    const dumped: Table[] = [];
    for (const table of await serviceTables(client)) dumped.push(await addTable(archive, client, table));
    const sequences = await sequenceStates(client);
    const attachments = await clientSession(client).all(STORED_ATTACHMENTS);
    await client.query('COMMIT');
    return {
      format: FORMAT,
      formatVersion: FORMAT_VERSION,
      serviceVersion: await serviceVersion(),
      postgresVersion: meta[0]?.version ?? 'unknown',
      migrations: migrations.map((m) => m.name),
      nextTransactionId: meta[0]?.next ?? '0',
      tables: dumped,
      sequences,
      attachments: attachments.map((a) => ({ key: a.key, size: Number(a.size), sha256: a.sha256 })),
    };
  } finally {
    await disconnect(client);
  }
}

/** An attachment's bytes from storage, failing if they are gone or not the ones recorded. */
async function* storedBytes(
  storage: AttachmentStorage,
  attachment: Manifest['attachments'][number],
): AsyncIterable<Buffer> {
  const stream = await storage.open(attachment.key);
  if (!stream) {
    throw new BackupError(
      `The bytes of attachment ${attachment.key} are missing from storage (deleted while the dump ran?): run the dump again`,
    );
  }
  const hash = createHash('sha256');
  let size = 0;
  for await (const chunk of stream) {
    const bytes = Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk));
    size += bytes.length;
    if (size > attachment.size) break;
    hash.update(bytes);
    yield bytes;
  }
  if (size !== attachment.size || hash.digest('hex') !== attachment.sha256) {
    throw new BackupError(
      `The stored bytes of attachment ${attachment.key} do not match the size and sha256 recorded for them: the storage is damaged`,
    );
  }
}

export interface DumpResult {
  file: string;
  manifest: Manifest;
}

export interface DumpOptions {
  log?: (message: string) => void;
  /** A stop signal: the dump ends at once, leaving nothing. */
  stop?: AbortSignal;
  /** Called with what removes the unfinished file synchronously, for a process forced to exit. */
  onUnfinished?: (discardNow: () => void) => void;
}

/**
 * Writes `file`: every table of the database in one consistent snapshot (taken while the service
 * runs and writes), then every attachment's bytes, checked against their recorded sha256, then the
 * manifest. The archive holds secrets: it is written only into a directory of the caller's alone,
 * under a name created exclusively (mode 0600), nothing of it is ever written elsewhere, and it
 * appears under its name only when complete; whatever fails, nothing of it is left.
 */
export async function dumpService(
  url: string,
  storage: AttachmentStorage,
  file: string,
  { log = () => undefined, stop, onUnfinished }: DumpOptions = {},
): Promise<DumpResult> {
  if (stop?.aborted) throw new BackupStopped(`stopped by ${stoppedBy(stop)}: no archive was written`);
  const out = await createArchiveFile(file);
  onUnfinished?.(out.discardNow);
  const archive = new ArchiveWriter(out.handle);
  const abort = () => archive.abort();
  stop?.addEventListener('abort', abort, { once: true });
  try {
    const snapshot = await addSnapshot(archive, url, stop);
    log(
      `read ${snapshot.tables.length} tables (${snapshot.tables.reduce((n, t) => n + t.rows, 0)} rows) in one snapshot`,
    );
    for (const attachment of snapshot.attachments) {
      await archive.add(attachmentEntry(attachment.key), attachment.size, storedBytes(storage, attachment));
    }
    log(`copied ${snapshot.attachments.length} attachments`);
    const manifest: Manifest = { ...snapshot, createdAt: new Date().toISOString() };
    const text = Buffer.from(`${JSON.stringify(manifest, null, 2)}\n`);
    await archive.add(MANIFEST_ENTRY, text.length, Readable.from([text]));
    await archive.close();
    if (stop?.aborted) throw new BackupStopped(`stopped by ${stoppedBy(stop)}`);
    await out.publish();
    return { file: path.resolve(file), manifest };
  } catch (error) {
    archive.abort();
    if (stop?.aborted) throw new BackupStopped(`stopped by ${stoppedBy(stop)}: no archive was written`);
    throw error;
  } finally {
    stop?.removeEventListener('abort', abort);
    await out.discard();
  }
}
