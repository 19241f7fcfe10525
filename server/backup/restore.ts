import { createHash } from 'node:crypto';
import { access, constants } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { z } from 'zod';
import { checkedRows } from '../db/checked-rows.js';
import type { Database } from '../db/database.js';
import { migrate, readMigrations, type Migration } from '../db/migrate.js';
import { ObjectTooLargeError, type AttachmentStorage } from '../storage/storage.js';
import { BackupError, readArchive, type Manifest } from './archive.js';
import { quoteIdent, serviceTables, tablesWithRows } from './catalog.js';
import { checkArchive, checkAttachment, checkTable, ExpectedEntries, type CheckedArchive } from './entries.js';
import { RESTORE_MARKER_TABLE } from './restore-marker.js';
import { BackupStopped, connect, disconnect, stoppedBy } from './stopping.js';
import { advanceTransactionIds } from './transaction-ids.js';

type Log = (message: string) => void;

async function withClient<T>(url: string, stop: AbortSignal | undefined, work: (client: pg.Client) => Promise<T>) {
  const client = await connect(url, stop);
  try {
    return await work(client);
  } finally {
    await disconnect(client);
  }
}

/** An archive read through and checked against its manifest, before anything of a target is touched. */
export interface OpenedArchive extends CheckedArchive {
  name: string;
}

export async function openArchive(name: string, stop?: AbortSignal): Promise<OpenedArchive> {
  await access(name, constants.R_OK).catch((error: unknown) => {
    const code = error instanceof Error && 'code' in error ? String(error.code) : String(error);
    throw new BackupError(`Cannot read ${name}: ${code}`);
  });
  return { ...(await checkArchive(name, stop)), name };
}

async function assertEmptyDatabase(url: string, stop: AbortSignal | undefined): Promise<void> {
  const filled = await withClient(url, stop, tablesWithRows);
  if (filled.length > 0) {
    throw new BackupError(
      `The target database already holds data (rows in ${filled.slice(0, 3).join(', ')}${filled.length > 3 ? ', …' : ''}): restore into an empty one (a new DATA_DIR, or a new database for DATABASE_URL)`,
    );
  }
}

/** Refuses a database or storage that holds anything: a restore never merges into data. */
async function assertEmptyTarget(url: string, storage: AttachmentStorage, stop: AbortSignal | undefined) {
  await assertEmptyDatabase(url, stop);
  for await (const entry of storage.list()) {
    throw new BackupError(
      `The target attachment storage already holds objects (${entry.key}, …): restore into empty storage (a new DATA_DIR, or an empty bucket)`,
    );
  }
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

/** A tally of the bytes passing through, for checking an entry as it is loaded. */
function tallied(content: AsyncIterable<Buffer>) {
  const hash = createHash('sha256');
  let bytes = 0;
  let rows = 0;
  async function* pass(): AsyncIterable<Buffer> {
    for await (const chunk of content) {
      hash.update(chunk);
      bytes += chunk.length;
      for (let i = chunk.indexOf(0x0a); i !== -1; i = chunk.indexOf(0x0a, i + 1)) rows++;
      yield chunk;
    }
  }
  return { bytes: pass(), digest: () => ({ bytes, rows, sha256: hash.digest('hex') }) };
}

/**
 * Loads the rows and the attachments in one database transaction, which also marks the restore
 * as loaded; every entry is checked again as it is loaded (the file is read a second time).
 * Attachments go to storage under new keys (the storage names its objects) and the rows are
 * pointed at them. Any failure rolls the transaction back and removes the objects written.
 */
async function load(
  url: string,
  storage: AttachmentStorage,
  archive: OpenedArchive,
  stop: AbortSignal | undefined,
): Promise<void> {
  const { manifest } = archive;
  const storedAs = new Map<string, string>();
  await withClient(url, stop, async (client) => {
    await client.query('BEGIN');
    try {
      await client.query('SET LOCAL statement_timeout = 0');
      await assertSameShape(client, manifest);
      const expected = new ExpectedEntries(manifest);
      // Read again, and checked again: the file may have changed since it was checked.
      await readArchive(
        archive.name,
        async (header, content) => {
          const entry = expected.next(header);
          const tally = tallied(content);
          if (entry.kind === 'table') {
            const { table } = entry;
            const copy = client.query(
              copyFrom(`COPY ${quoteIdent(table.name)} (${table.columns.map(quoteIdent).join(', ')}) FROM STDIN`),
            );
            await pipeline(Readable.from(tally.bytes), copy);
            checkTable(table, tally.digest());
          } else if (entry.kind === 'attachment') {
            const { attachment } = entry;
            const stored = await storage
              .write(Readable.from(tally.bytes), { maxBytes: attachment.size })
              .catch((error: unknown) => {
                if (error instanceof ObjectTooLargeError) return undefined;
                throw error;
              });
            if (stored) storedAs.set(attachment.key, stored.key);
            checkAttachment(
              attachment,
              stored ? { bytes: stored.size, sha256: stored.sha256 } : { bytes: -1, sha256: '' },
            );
          } else {
            for await (const chunk of tally.bytes) void chunk;
            if (tally.digest().sha256 !== archive.manifestSha256)
              throw new BackupError(`${archive.name} changed while it was restored: restore it again`);
          }
        },
        stop,
      );
      expected.finish();
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
      await client.query(`UPDATE ${quoteIdent(RESTORE_MARKER_TABLE)} SET state = 'loaded'`);
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      await Promise.all([...storedAs.values()].map((key) => storage.remove(key).catch(() => undefined)));
      throw error;
    }
  });
}

interface Mark {
  archive: string;
  createdAt: string;
  state: 'loading' | 'loaded';
}

async function readMark(client: pg.Client): Promise<Mark | undefined> {
  const marked = await checkedRows(
    client,
    z.object({ marked: z.boolean() }),
    'SELECT to_regclass($1) IS NOT NULL AS marked',
    [quoteIdent(RESTORE_MARKER_TABLE)],
  );
  if (!marked[0]?.marked) return undefined;
  // The marker is the restore's own table, no model: its columns are those restoreService creates.
  const [row] = await checkedRows(
    client,
    z.object({ archive: z.string(), created_at: z.string(), state: z.string() }),
    `SELECT archive, created_at, state FROM ${quoteIdent(RESTORE_MARKER_TABLE)}`,
  );
  return {
    archive: row?.archive ?? '',
    createdAt: row?.created_at ?? '?',
    state: row?.state === 'loaded' ? 'loaded' : 'loading',
  };
}

// Any constant: the session-level advisory lock a restore holds on its target for its whole run.
const RESTORE_LOCK_KEY = 7_231_004_120;

/**
 * Restores an archive of dumpService (checked by openArchive) into an empty database and
 * attachment storage: marks the target, migrates the schema to the archive's level, loads
 * everything in one transaction, applies the migrations this version adds, moves the transaction
 * counter past the archive's so the event log continues where it was, and unmarks the target.
 * Cut short at any point, it leaves the mark: run again with the same archive, it finishes
 * (loading again what did not commit), and the service refuses to start meanwhile.
 */
export async function restoreService(
  db: Database,
  storage: AttachmentStorage,
  archive: OpenedArchive,
  { log = () => undefined, stop }: { log?: Log; stop?: AbortSignal } = {},
): Promise<Manifest> {
  const { manifest } = archive;
  const known = await readMigrations();
  const atArchiveLevel = migrationsOfArchive(manifest, known);
  let marked = false;
  try {
    return await withClient(db.url, stop, async (session) => {
      const rows = await checkedRows(
        session,
        z.object({ locked: z.boolean() }),
        'SELECT pg_try_advisory_lock($1) AS locked',
        [RESTORE_LOCK_KEY],
      );
      if (!rows[0]?.locked) throw new BackupError('Another restore is running into this database: let it finish');
      const mark = await readMark(session);
      marked = mark !== undefined;
      if (!mark) {
        await assertEmptyTarget(db.url, storage, stop);
        const table = quoteIdent(RESTORE_MARKER_TABLE);
        await session.query('BEGIN');
        await session.query(
          `CREATE TABLE ${table} (archive text NOT NULL, created_at text NOT NULL, state text NOT NULL)`,
        );
        await session.query(`INSERT INTO ${table} VALUES ($1, $2, 'loading')`, [
          archive.manifestSha256,
          manifest.createdAt,
        ]);
        await session.query('COMMIT');
        marked = true;
        log(`loading ${archive.name} into the target (if this stops midway, run the same restore again to finish it)`);
      } else if (mark.archive !== archive.manifestSha256) {
        throw new BackupError(
          `The target holds an unfinished restore of another archive (made ${mark.createdAt}): finish it with that archive, or restore into a new target`,
        );
      } else {
        log(`finishing the unfinished restore of ${archive.name} (${mark.state})`);
      }
      if (mark?.state !== 'loaded') {
        if (mark) {
          // What an interrupted load left in storage: nothing of it committed, and the storage was empty before.
          await assertEmptyDatabase(db.url, stop);
          for await (const entry of storage.list()) await storage.remove(entry.key);
          await storage.removeStaleWrites(new Date());
        }
        await migrate(db.sql, atArchiveLevel);
        await load(db.url, storage, archive, stop);
        log(
          `loaded ${manifest.tables.reduce((n, t) => n + t.rows, 0)} rows and ${manifest.attachments.length} attachments`,
        );
      }
      const upgraded = await migrate(db.sql, known);
      if (upgraded.length > 0) log(`applied the migrations of this version: ${upgraded.join(', ')}`);
      await advanceTransactionIds(db.url, BigInt(manifest.nextTransactionId), log, stop);
      if (stop?.aborted) throw new BackupStopped(`stopped by ${stoppedBy(stop)}`);
      await session.query(`DROP TABLE ${quoteIdent(RESTORE_MARKER_TABLE)}`);
      return manifest;
    });
  } catch (error) {
    if (stop?.aborted)
      throw new BackupStopped(
        `stopped by ${stoppedBy(stop)}: ${marked ? 'the restore is unfinished; run it again to finish it' : 'nothing was written'}`,
      );
    throw error;
  }
}
