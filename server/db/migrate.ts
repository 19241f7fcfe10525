import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { sql } from 'kysely';
import { OperatorError } from '../operator-error.js';
import { PROJECT_ROOT } from '../project-root.js';
import { rawQuery } from './query.js';
import type { SqlDatabase, SqlSession } from './sql.js';

export const MIGRATIONS_DIR = path.join(PROJECT_ROOT, 'prisma', 'migrations');

// Any constant shared by every instance: the advisory lock that serialises migration runs.
const MIGRATION_LOCK_KEY = 7_231_004_118;

export interface Migration {
  name: string;
  sql: string;
  checksum: string;
}

export async function readMigrations(dir = MIGRATIONS_DIR): Promise<Migration[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const names = entries
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort();
  return Promise.all(
    names.map(async (name) => {
      const sql = await readFile(path.join(dir, name, 'migration.sql'), 'utf8');
      return { name, sql, checksum: createHash('sha256').update(sql).digest('hex') };
    }),
  );
}

const CREATE_HISTORY = `CREATE TABLE IF NOT EXISTS "_migrations" (
  "name" TEXT PRIMARY KEY,
  "checksum" TEXT NOT NULL,
  "applied_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP
)`;

// The history table is the runner's own, not one of the models: its rows are typed here.
const HISTORY = rawQuery(sql<{ name: string; checksum: string }>`SELECT name, checksum FROM "_migrations"`);

async function appliedMigrations(db: SqlSession): Promise<Map<string, string>> {
  const exists = await db.first(rawQuery(sql<{ t: string | null }>`SELECT to_regclass('"_migrations"')::text AS t`));
  if (!exists?.t) return new Map();
  const rows = await db.all(HISTORY);
  return new Map(rows.map((r) => [r.name, r.checksum]));
}

export class MigrationError extends OperatorError {}

function assertHistoryMatches(applied: Map<string, string>, migrations: Migration[]): void {
  const known = new Map(migrations.map((m) => [m.name, m.checksum]));
  for (const [name, checksum] of applied) {
    const expected = known.get(name);
    if (expected === undefined) {
      throw new MigrationError(
        `The database has migration ${name}, which this version does not know: is it older than the database?`,
      );
    }
    if (expected !== checksum) {
      throw new MigrationError(`Migration ${name} was changed after it was applied`);
    }
  }
}

/** Whether the database has applied exactly `migrations`, as most starts find: one statement, no lock. */
async function isCurrent(db: SqlSession, migrations: Migration[]): Promise<boolean> {
  // No history table yet (or any other failure): the full run below finds out, and says what is wrong.
  const applied = await db.all(HISTORY).catch(() => undefined);
  if (applied?.length !== migrations.length) return false;
  const checksums = new Map(applied.map((m) => [m.name, m.checksum]));
  return migrations.every((m) => checksums.get(m.name) === m.checksum);
}

/**
 * Applies every pending migration in one transaction, under an advisory lock, so that instances
 * starting together apply each migration once and a failed migration leaves nothing half-done.
 */
export async function migrate(db: SqlDatabase, migrations?: Migration[]): Promise<string[]> {
  const all = migrations ?? (await readMigrations());
  if (await isCurrent(db, all)) return [];
  return db.transaction(async (tx) => {
    // Building an index on a large table may take longer than a request's statement timeout.
    await tx.exec('SET LOCAL statement_timeout = 0');
    await tx.all(rawQuery(sql`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`));
    await tx.exec(CREATE_HISTORY);
    const applied = await appliedMigrations(tx);
    assertHistoryMatches(applied, all);
    const pending = all.filter((m) => !applied.has(m.name));
    for (const m of pending) {
      await tx.exec(m.sql);
      await tx.write(rawQuery(sql`INSERT INTO "_migrations" (name, checksum) VALUES (${m.name}, ${m.checksum})`));
    }
    return pending.map((m) => m.name);
  });
}

/** Names of migrations this version ships that the database has not applied yet. */
export async function pendingMigrations(db: SqlSession, migrations: Migration[]): Promise<string[]> {
  const applied = await appliedMigrations(db);
  return migrations.filter((m) => !applied.has(m.name)).map((m) => m.name);
}
