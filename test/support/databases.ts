import { randomUUID } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { fromPglite, openPostgres, type Database } from '../../server/db/database.js';
import { pgliteSql, pgSql } from '../../server/db/sql.js';
import { migrate } from '../../server/db/migrate.js';

export const TEST_DATA_DIR = fileURLToPath(new URL('../../.test-data', import.meta.url));
const PGLITE_TEMPLATE = path.join(TEST_DATA_DIR, 'pglite-template.tar.gz');
const PG_TEMPLATE = 'task_service_test_template';

/** The admin connection string of the PostgreSQL server under test, or undefined. */
export const postgresUrl = (): string | undefined => process.env.TEST_DATABASE_URL;

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

/** Once per run: a migrated database that every test file clones (initdb per file is slow). */
export async function prepareTemplates(): Promise<void> {
  await mkdir(TEST_DATA_DIR, { recursive: true });
  const pglite = await PGlite.create();
  await migrate(pgliteSql(pglite));
  const dump = await pglite.dumpDataDir('gzip');
  await writeFile(PGLITE_TEMPLATE, Buffer.from(await dump.arrayBuffer()));
  await pglite.close();

  const url = postgresUrl();
  if (url) {
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${PG_TEMPLATE} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${PG_TEMPLATE}`);
    await admin.end();
    const pool = new pg.Pool({ connectionString: withDatabase(url, PG_TEMPLATE), max: 1 });
    await migrate(pgSql(pool));
    await pool.end();
  }
}

export interface TestDatabase {
  db: Database;
  /** For tests that open a second handle on the same database (several instances). */
  url: string | undefined;
  drop(): Promise<void>;
}

/** A fresh, migrated database for one test file: PGlite or PostgreSQL, as the project says. */
export async function freshDatabase(): Promise<TestDatabase> {
  const url = postgresUrl();
  if (process.env.TEST_DB === 'postgres' && url) {
    const name = `task_service_test_${randomUUID().replace(/-/g, '')}`;
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name} TEMPLATE ${PG_TEMPLATE}`);
    await admin.end();
    const dbUrl = withDatabase(url, name);
    const db = openPostgres(dbUrl, 5);
    return {
      db,
      url: dbUrl,
      drop: async () => {
        await db.close();
        const cleanup = new pg.Client({ connectionString: url });
        await cleanup.connect();
        await cleanup.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
        await cleanup.end();
      },
    };
  }
  const template = new Blob([await readFile(PGLITE_TEMPLATE)]);
  const pglite = await PGlite.create({ loadDataDir: template });
  const db = fromPglite(pglite);
  return { db, url: undefined, drop: () => db.close() };
}
