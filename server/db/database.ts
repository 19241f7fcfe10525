import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import { PrismaPGlite } from 'pglite-prisma-adapter';
import lockfile from 'proper-lockfile';
import { PrismaClient } from '../generated/prisma/client.js';
import { pgliteSql, pgSql, type SqlDatabase } from './sql.js';

export type { PrismaClient };

export interface Database {
  kind: 'pglite' | 'postgres';
  prisma: PrismaClient;
  sql: SqlDatabase;
  close(): Promise<void>;
}

export class DataDirLockedError extends Error {
  constructor(dir: string) {
    super(
      `The data directory ${dir} is in use by another process of this service. ` +
        'Stop that process first, or give this one another DATA_DIR. ' +
        '(If no such process runs, the lock goes stale 10 seconds after it died.)',
    );
  }
}

/** The embedded database: PGlite in DATA_DIR/pglite, held under an exclusive lock. */
export async function openPglite(dataDir: string): Promise<Database> {
  await mkdir(dataDir, { recursive: true });
  let release: () => Promise<void>;
  try {
    // PGlite has no lock of its own, and two processes on one directory corrupt it.
    release = await lockfile.lock(dataDir, { lockfilePath: path.join(dataDir, 'service.lock'), stale: 10_000 });
  } catch (error) {
    if (error instanceof Error && 'code' in error && error.code === 'ELOCKED') throw new DataDirLockedError(dataDir);
    throw error;
  }
  try {
    const pglite = await PGlite.create(path.join(dataDir, 'pglite'));
    return fromPglite(pglite, async () => {
      await pglite.close();
      await release();
    });
  } catch (error) {
    await release();
    throw error;
  }
}

/** Wraps an open PGlite (tests hand in one cloned from a migrated template). */
export function fromPglite(pglite: PGlite, onClose: () => Promise<void> = () => pglite.close()): Database {
  const prisma = new PrismaClient({ adapter: new PrismaPGlite(pglite) });
  return {
    kind: 'pglite',
    prisma,
    sql: pgliteSql(pglite),
    close: async () => {
      await prisma.$disconnect();
      await onClose();
    },
  };
}

export function openPostgres(url: string, poolSize: number): Database {
  const pool = new pg.Pool({ connectionString: url, max: poolSize });
  // An idle client losing its connection must not crash the process; the next query reconnects.
  pool.on('error', () => undefined);
  const prisma = new PrismaClient({ adapter: new PrismaPg(pool) });
  return {
    kind: 'postgres',
    prisma,
    sql: pgSql(pool),
    close: async () => {
      await prisma.$disconnect();
      await pool.end();
    },
  };
}

/** The database the configuration names: PostgreSQL when DATABASE_URL is set, else embedded PGlite. */
export function openDatabase(config: { databaseUrl: string | undefined; databasePoolSize: number; dataDir: string }): Promise<Database> {
  return config.databaseUrl ? Promise.resolve(openPostgres(config.databaseUrl, config.databasePoolSize)) : openPglite(config.dataDir);
}
