import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdtemp, readFile, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import pg from 'pg';
import { to as copyTo } from 'pg-copy-streams';
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
import { MIGRATIONS_TABLE, quoteIdent, sequenceStates, serviceTables } from './catalog.js';

const NEWLINE = 0x0a;

export async function serviceVersion(): Promise<string> {
  const text = await readFile(path.join(PROJECT_ROOT, 'package.json'), 'utf8');
  const version: unknown = JSON.parse(text).version;
  return typeof version === 'string' ? version : 'unknown';
}

type TableDump = Manifest['tables'][number] & { spool: string };

/** One table's rows, in COPY text format, into a file; COPY ends every row with a newline (one inside a value is escaped). */
async function spoolTable(
  client: pg.Client,
  table: { name: string; columns: string[] },
  spool: string,
): Promise<TableDump> {
  const columns = table.columns.map(quoteIdent).join(', ');
  const hash = createHash('sha256');
  let rows = 0;
  const count = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      hash.update(chunk);
      for (let i = chunk.indexOf(NEWLINE); i !== -1; i = chunk.indexOf(NEWLINE, i + 1)) rows++;
      done(null, chunk);
    },
  });
  await pipeline(
    client.query(copyTo(`COPY ${quoteIdent(table.name)} (${columns}) TO STDOUT`)),
    count,
    createWriteStream(spool, { mode: 0o600 }),
  );
  return {
    name: table.name,
    columns: table.columns,
    rows,
    bytes: (await stat(spool)).size,
    sha256: hash.digest('hex'),
    spool,
  };
}

interface Snapshot {
  manifest: Omit<Manifest, 'tables' | 'createdAt'>;
  tables: TableDump[];
}

/** Every table, the sequences and the attachments' list, read in one snapshot of the database. */
async function readSnapshot(url: string, spoolDir: string): Promise<Snapshot> {
  const client = new pg.Client({ connectionString: url, application_name: 'task-service dump' });
  await client.connect();
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    await client.query('SET LOCAL statement_timeout = 0');
    const { rows: history } = await client.query<{ exists: boolean }>(`SELECT to_regclass($1) IS NOT NULL AS exists`, [
      quoteIdent(MIGRATIONS_TABLE),
    ]);
    if (!history[0]?.exists)
      throw new BackupError('The database has no schema of this service yet: there is nothing to dump');
    const { rows: migrations } = await client.query<{ name: string }>(
      `SELECT name FROM ${quoteIdent(MIGRATIONS_TABLE)} ORDER BY name`,
    );
    const { rows: meta } = await client.query<{ next: string; version: string }>(
      `SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS next, current_setting('server_version') AS version`,
    );
    const tables: TableDump[] = [];
    for (const [index, table] of (await serviceTables(client)).entries()) {
      tables.push(await spoolTable(client, table, path.join(spoolDir, `${index}.copy`)));
    }
    const sequences = await sequenceStates(client);
    const { rows: attachments } = await client.query<{ key: string; size: string; sha256: string }>(
      'SELECT storage_key AS key, size::text AS size, sha256 FROM attachments ORDER BY storage_key',
    );
    await client.query('COMMIT');
    return {
      manifest: {
        format: FORMAT,
        formatVersion: FORMAT_VERSION,
        serviceVersion: await serviceVersion(),
        postgresVersion: meta[0]?.version ?? 'unknown',
        migrations: migrations.map((m) => m.name),
        nextTransactionId: meta[0]?.next ?? '0',
        sequences,
        attachments: attachments.map((a) => ({ key: a.key, size: Number(a.size), sha256: a.sha256 })),
      },
      tables,
    };
  } finally {
    await client.end();
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

/**
 * Writes `file`: every table of the database in one consistent snapshot (taken while the service
 * runs and writes), then every attachment's bytes, checked against their recorded sha256, then the
 * manifest. The file appears only when complete.
 */
export async function dumpService(
  url: string,
  storage: AttachmentStorage,
  file: string,
  log: (message: string) => void = () => undefined,
): Promise<DumpResult> {
  const target = path.resolve(file);
  const partial = `${target}.partial-${process.pid}`;
  const spoolDir = await mkdtemp(path.join(path.dirname(target), '.dump-'));
  try {
    const snapshot = await readSnapshot(url, spoolDir);
    log(
      `read ${snapshot.tables.length} tables (${snapshot.tables.reduce((n, t) => n + t.rows, 0)} rows) in one snapshot`,
    );
    const archive = new ArchiveWriter(partial);
    try {
      for (const table of snapshot.tables)
        await archive.add(tableEntry(table.name), table.bytes, createReadStream(table.spool));
      for (const attachment of snapshot.manifest.attachments) {
        await archive.add(attachmentEntry(attachment.key), attachment.size, storedBytes(storage, attachment));
      }
      log(`copied ${snapshot.manifest.attachments.length} attachments`);
      const manifest: Manifest = {
        ...snapshot.manifest,
        createdAt: new Date().toISOString(),
        tables: snapshot.tables.map(({ spool: _spool, ...table }) => table),
      };
      const text = Buffer.from(`${JSON.stringify(manifest, null, 2)}\n`);
      await archive.add(MANIFEST_ENTRY, text.length, Readable.from([text]));
      await archive.close();
      await rename(partial, target);
      return { file: target, manifest };
    } catch (error) {
      archive.abort();
      throw error;
    }
  } finally {
    await rm(partial, { force: true });
    await rm(spoolDir, { recursive: true, force: true });
  }
}
