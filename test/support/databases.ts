import { randomUUID } from 'node:crypto';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { fromPglite, openPostgres, type Database } from '../../server/db/database.js';
import { pgliteSql, pgSql, type SqlDatabase } from '../../server/db/sql.js';
import { migrate } from '../../server/db/migrate.js';

export const TEST_DATA_DIR = fileURLToPath(new URL('../../.test-data', import.meta.url));
// Named per run (global setup sets the variable, test workers inherit it), so that runs side by side
// never clone a template another run is rebuilding.
const runId = () => process.env.TEST_RUN_ID ?? 'default';
const pgliteTemplate = () => path.join(TEST_DATA_DIR, `pglite-template-${runId()}.tar.gz`);
const pgTemplate = () => `task_service_test_template_${runId()}`;

/** The admin connection string of the PostgreSQL server under test, or undefined. */
export const postgresUrl = (): string | undefined => process.env.TEST_DATABASE_URL;

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

/** Once per run: a migrated database that every test file clones (initdb per file is slow). */
export async function prepareTemplates(): Promise<void> {
  process.env.TEST_RUN_ID ??= `${process.pid}`;
  await mkdir(TEST_DATA_DIR, { recursive: true });
  const pglite = await PGlite.create();
  await migrate(pgliteSql(pglite));
  const dump = await pglite.dumpDataDir('gzip');
  await writeFile(pgliteTemplate(), Buffer.from(await dump.arrayBuffer()));
  await pglite.close();

  const url = postgresUrl();
  if (url) {
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${pgTemplate()} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${pgTemplate()}`);
    await admin.end();
    const pool = new pg.Pool({ connectionString: withDatabase(url, pgTemplate()), max: 1 });
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
    await admin.query(`CREATE DATABASE ${name} TEMPLATE ${pgTemplate()}`);
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
  const template = new Blob([await readFile(pgliteTemplate())]);
  const pglite = await PGlite.create({ loadDataDir: template });
  const db = fromPglite(pglite);
  return { db, url: undefined, drop: () => db.close() };
}

/** After the run: the templates go. */
export async function removeTemplates(): Promise<void> {
  await rm(pgliteTemplate(), { force: true });
  const url = postgresUrl();
  if (url) {
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${pgTemplate()} WITH (FORCE)`);
    await admin.end();
  }
}

/** An empty database on the server under test (nothing migrated), for comparing schemas. */
export async function emptyDatabase(): Promise<{ sql: SqlDatabase; drop(): Promise<void> }> {
  const url = postgresUrl();
  if (process.env.TEST_DB === 'postgres' && url) {
    const name = `task_service_scratch_${randomUUID().replace(/-/g, '')}`;
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`);
    const pool = new pg.Pool({ connectionString: withDatabase(url, name), max: 1 });
    return {
      sql: pgSql(pool),
      drop: async () => {
        await pool.end();
        await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
        await admin.end();
      },
    };
  }
  const pglite = await PGlite.create();
  return { sql: pgliteSql(pglite), drop: () => pglite.close() };
}
