import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import type { Database } from '../db/database.js';
import { migrate, readMigrations, type Migration } from '../db/migrate.js';
import type { AttachmentStorage } from '../storage/storage.js';
import {
  attachmentEntry,
  BackupError,
  MANIFEST_ENTRY,
  parseManifest,
  readArchive,
  tableEntry,
  type Manifest,
} from './archive.js';
import { quoteIdent, serviceTables, tablesWithRows } from './catalog.js';
import { advanceTransactionIds } from './transaction-ids.js';

type Log = (message: string) => void;

async function withClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, application_name: 'task-service restore' });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** Refuses a database or storage that holds anything: a restore never merges into data. */
async function assertEmptyTarget(url: string, storage: AttachmentStorage): Promise<void> {
  const filled = await withClient(url, tablesWithRows);
  if (filled.length > 0) {
    throw new BackupError(
      `The target database already holds data (rows in ${filled.slice(0, 3).join(', ')}${filled.length > 3 ? ', …' : ''}): restore into an empty one (a new DATA_DIR, or a new database for DATABASE_URL)`,
    );
  }
  for await (const entry of storage.list()) {
    throw new BackupError(
      `The target attachment storage already holds objects (${entry.key}, …): restore into empty storage (a new DATA_DIR, or an empty bucket)`,
    );
  }
}

/** Reads the whole archive once and checks every entry against the manifest's sizes and sha256. */
async function verifyArchive(file: string): Promise<Manifest> {
  const seen = new Map<string, { bytes: number; sha256: string }>();
  let manifestText: string | undefined;
  await readArchive(file, async (name, _size, content) => {
    const hash = createHash('sha256');
    const chunks: Buffer[] = [];
    let bytes = 0;
    for await (const chunk of content) {
      hash.update(chunk);
      bytes += chunk.length;
      if (name === MANIFEST_ENTRY) chunks.push(chunk);
    }
    if (name === MANIFEST_ENTRY) manifestText = Buffer.concat(chunks).toString('utf8');
    else seen.set(name, { bytes, sha256: hash.digest('hex') });
  });
  if (manifestText === undefined)
    throw new BackupError(`${file} has no manifest: it is cut short, or not a backup of this service`);
  const manifest = parseManifest(manifestText);
  const check = (entry: string, what: string, expected: { bytes: number; sha256: string }) => {
    const found = seen.get(entry);
    if (!found) throw new BackupError(`The archive lacks ${what}: it is damaged`);
    if (found.bytes !== expected.bytes || found.sha256 !== expected.sha256) {
      throw new BackupError(`${what} in the archive do not match their sha256 in the manifest: the archive is damaged`);
    }
  };
  for (const table of manifest.tables) check(tableEntry(table.name), `The rows of table ${table.name}`, table);
  for (const a of manifest.attachments)
    check(attachmentEntry(a.key), `The bytes of attachment ${a.key}`, { bytes: a.size, sha256: a.sha256 });
  return manifest;
}

/** The migrations that make the archive's schema: all known to this version, else it is newer than this code. */
function migrationsOfArchive(manifest: Manifest, known: Migration[]): Migration[] {
  const names = new Set(known.map((m) => m.name));
  const unknown = manifest.migrations.filter((name) => !names.has(name));
  if (unknown.length > 0) {
    throw new BackupError(
      `The archive's schema has migration ${unknown[0]}, which this version does not know: restore it with version ${manifest.serviceVersion} or later`,
    );
  }
  const level = new Set(manifest.migrations);
  return known.filter((m) => level.has(m.name));
}

/** The tables as the archive has them must be the tables of the migrated target. */
async function assertSameShape(client: pg.Client, manifest: Manifest): Promise<void> {
  const target = new Map((await serviceTables(client)).map((t) => [t.name, new Set(t.columns)]));
  for (const table of manifest.tables) {
    const columns = target.get(table.name);
    const missing = columns ? table.columns.filter((c) => !columns.has(c)) : ['(the whole table)'];
    if (missing.length > 0)
      throw new BackupError(
        `The target schema has no ${table.name}.${missing[0]}: the archive does not fit this version's migrations`,
      );
  }
}

/**
 * Loads the rows and the attachments in one database transaction; attachments go to storage
 * under new keys (the storage names its objects) and the rows are pointed at them. Any failure
 * rolls the transaction back and removes the objects written, leaving the target as it was.
 */
async function load(url: string, storage: AttachmentStorage, file: string, manifest: Manifest): Promise<void> {
  const tables = new Map(manifest.tables.map((t) => [tableEntry(t.name), t]));
  const attachments = new Map(manifest.attachments.map((a) => [attachmentEntry(a.key), a]));
  const storedAs = new Map<string, string>();
  await withClient(url, async (client) => {
    await client.query('BEGIN');
    try {
      await client.query('SET LOCAL statement_timeout = 0');
      await assertSameShape(client, manifest);
      const loaded = new Set<string>();
      await readArchive(file, async (name, _size, content) => {
        const table = tables.get(name);
        if (table) {
          const copy = client.query(
            copyFrom(`COPY ${quoteIdent(table.name)} (${table.columns.map(quoteIdent).join(', ')}) FROM STDIN`),
          );
          await pipeline(Readable.from(content), copy);
          if (copy.rowCount !== table.rows)
            throw new BackupError(
              `Table ${table.name} loaded ${copy.rowCount} rows where the manifest says ${table.rows}: the archive is damaged`,
            );
          loaded.add(name);
          return;
        }
        const attachment = attachments.get(name);
        if (attachment) {
          const stored = await storage.write(Readable.from(content), { maxBytes: attachment.size });
          storedAs.set(attachment.key, stored.key);
          if (stored.size !== attachment.size || stored.sha256 !== attachment.sha256) {
            throw new BackupError(
              `The bytes of attachment ${attachment.key} do not match their sha256 in the manifest: the archive is damaged`,
            );
          }
          loaded.add(name);
        }
      });
      const absent = [...tables.keys(), ...attachments.keys()].find((entry) => !loaded.has(entry));
      if (absent) throw new BackupError(`The archive lacks ${absent}: it is damaged`);
      // The holdings triggers counted the loaded rows on top of the loaded holdings: count afresh.
      await client.query('SELECT recount_user_holdings()');
      const renamed = await client.query(
        `UPDATE attachments SET storage_key = m.new_key FROM unnest($1::text[], $2::text[]) AS m(old_key, new_key) WHERE attachments.storage_key = m.old_key`,
        [[...storedAs.keys()], [...storedAs.values()]],
      );
      if (renamed.rowCount !== storedAs.size)
        throw new BackupError('The archive lists attachment bytes that no attachment row refers to: it is damaged');
      for (const sequence of manifest.sequences) {
        await client.query('SELECT setval($1::regclass, $2::bigint, $3)', [
          quoteIdent(sequence.name),
          sequence.lastValue,
          sequence.isCalled,
        ]);
      }
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      await Promise.all([...storedAs.values()].map((key) => storage.remove(key).catch(() => undefined)));
      throw error;
    }
  });
}

/**
 * Restores an archive of dumpService into an empty database and attachment storage: checks every
 * checksum first, migrates the schema to the archive's level, loads everything in one
 * transaction, applies the migrations this version adds, and moves the transaction counter past
 * the archive's so the event log continues where it was.
 */
export async function restoreService(
  db: Database,
  storage: AttachmentStorage,
  file: string,
  log: Log = () => undefined,
): Promise<Manifest> {
  await assertEmptyTarget(db.url, storage);
  const manifest = await verifyArchive(file);
  log(
    `the archive (made ${manifest.createdAt} by version ${manifest.serviceVersion}) is intact: ${manifest.tables.length} tables, ${manifest.attachments.length} attachments`,
  );
  const known = await readMigrations();
  await migrate(db.sql, migrationsOfArchive(manifest, known));
  await load(db.url, storage, file, manifest);
  log(`loaded ${manifest.tables.reduce((n, t) => n + t.rows, 0)} rows and ${manifest.attachments.length} attachments`);
  const upgraded = await migrate(db.sql, known);
  if (upgraded.length > 0) log(`applied the migrations of this version: ${upgraded.join(', ')}`);
  await advanceTransactionIds(db.url, BigInt(manifest.nextTransactionId), log);
  return manifest;
}
