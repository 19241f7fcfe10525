import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { promisify } from 'node:util';
import pg from 'pg';
import { openPostgres, type Database } from '../../server/db/database.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../server/db/embedded-postgres.js';
import { pgSql, type SqlDatabase } from '../../server/db/sql.js';
import { migrate } from '../../server/db/migrate.js';
import { disposablePostgres, serverReachableTempDir, type DisposablePostgres } from './disposable-postgres.js';
import { runCli } from './processes.js';

const run = promisify(execFile);

// Named per run (global setup sets the variable, test workers inherit it), so that runs side by side
// never clone a template another run is rebuilding.
const runId = () => process.env.TEST_RUN_ID ?? 'default';
const templateName = () => `task_service_test_template_${runId()}`;

/**
 * The connection string of the server this test project runs on: the embedded PostgreSQL the run
 * started (project "embedded"), or TEST_DATABASE_URL's server (projects "postgres" and "pgbouncer").
 */
export function postgresUrl(): string {
  const url =
    process.env.TEST_DB === 'embedded'
      ? workersServer(process.env.TEST_EMBEDDED_URLS)
      : process.env.TEST_DB === 'postgres'
        ? (workersServer(process.env.TEST_POSTGRES_URLS) ?? process.env.TEST_DATABASE_URL)
        : process.env.TEST_DATABASE_URL;
  if (!url) throw new Error(`no database server for test project ${process.env.TEST_DB ?? '(none)'}`);
  return url;
}

/**
 * This worker's server of `servers` (comma-separated URLs). The run starts one per worker
 * (TEST_SERVERS, set by vitest.config.ts), because PostgreSQL's snapshot horizon is the server's,
 * not a database's: a transaction open in one test file's database holds back what every other
 * file's event readers may read until it ends. A worker runs one file at a time, so no file waits
 * for another.
 */
function workersServer(servers: string | undefined): string | undefined {
  const urls = (servers ?? '').split(',').filter(Boolean);
  if (urls.length === 0) return undefined;
  // Workers of each pool are numbered from 1; the CPU files' pool takes the servers after the others'.
  const offset = process.env.TEST_POOL === 'cpu' ? Number(process.env.TEST_WAITING_WORKERS ?? 0) : 0;
  const worker = offset + Number(process.env.VITEST_POOL_ID ?? 1) - 1;
  return urls[worker % Math.max(urls.length, 1)];
}

/** Whether this project's server is one the run started for itself (durability off), not TEST_DATABASE_URL's. */
const onRunsOwnServer = (): boolean =>
  process.env.TEST_DB === 'embedded' || (process.env.TEST_DB === 'postgres' && Boolean(process.env.TEST_POSTGRES_URLS));

/** Project "pgbouncer": the service reaches TEST_DATABASE_URL's server through TEST_POOLER_URL, a PgBouncer in transaction mode. */
export const throughPooler = (): boolean => process.env.TEST_DB === 'pgbouncer';

/**
 * Tests' handles bound statements as the service does (per transaction, pipelined), with room for a
 * machine busy running test files in parallel.
 */
export const TEST_STATEMENT_TIMEOUT_MS = 30_000;

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

/** How the service reaches database `name`: through the pooler in project "pgbouncer", else directly. */
export function serviceUrl(name: string): string {
  const pooler = process.env.TEST_POOLER_URL;
  if (throughPooler() && !pooler) throw new Error('project pgbouncer needs TEST_POOLER_URL');
  return withDatabase(throughPooler() && pooler ? pooler : postgresUrl(), name);
}

/** The direct way to the database that `url` (perhaps a pooler's) names. */
export const directUrlOf = (url: string): string => withDatabase(postgresUrl(), new URL(url).pathname.slice(1));

/**
 * A handle on the database at `url` as the service opens one: the statement timeout set, LISTEN on
 * the direct URL, or (project "pgbouncer", no DATABASE_DIRECT_URL) polling for events.
 */
export function openTestDatabase(url: string, poolSize = 5, directUrl = throughPooler() ? undefined : url): Database {
  return openPostgres(url, { poolSize, statementTimeoutMs: TEST_STATEMENT_TIMEOUT_MS, directUrl });
}

/**
 * Statements on a connection of their own to the database at `url` (directly, never through the
 * pooler), outside the service's statement timeout and transactions: a bulk load at a realistic
 * volume can outlast the timeout on a busy machine, and VACUUM runs outside any transaction. Rows
 * are not read here: tests read them through typed queries.
 *
 * The GIN indexes (trigram search, event audiences) are dropped first and built again after the
 * load, as a bulk load is done in production, then the tables analysed (an index on an expression
 * has statistics of its own): kept up to date row by row, they cost 60,000 tasks a sixth of their
 * load. The B-tree indexes stay, built row by row as a service builds them: a sorted build packs
 * them denser, and the planner's choices of the list plans' tests with them.
 */
export async function bulkLoad(
  url: string,
  load: (run: (text: string, values?: unknown[]) => Promise<void>) => Promise<void>,
): Promise<void> {
  const client = new pg.Client({ connectionString: directUrlOf(url) });
  await client.connect();
  try {
    await client.query('SET statement_timeout = 0');
    const { rows: indexes } = await client.query<{ name: string; definition: string }>(
      `SELECT quote_ident(indexname) AS name, indexdef AS definition FROM pg_indexes
       WHERE schemaname = current_schema() AND indexdef ~ ' USING gin '
         AND NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conindid = format('%I.%I', schemaname, indexname)::regclass)`,
    );
    if (indexes.length > 0) await client.query(`DROP INDEX ${indexes.map((index) => index.name).join(', ')}`);
    await load(async (text, values) => {
      await client.query(text, values);
    });
    for (const index of indexes) await client.query(index.definition);
    await client.query('ANALYZE');
  } finally {
    await client.end();
  }
}

async function onServer<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: withDatabase(url, 'postgres') });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

async function createTemplate(url: string): Promise<void> {
  await onServer(url, async (admin) => {
    await admin.query(`DROP DATABASE IF EXISTS ${templateName()} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${templateName()}`);
  });
  const pool = new pg.Pool({ connectionString: withDatabase(url, templateName()), max: 1 });
  await migrate(pgSql(pool));
  await pool.end();
}

export { serverReachableTempDir };

let embedded: { server: EmbeddedPostgres; dir: string }[] = [];
let clusters: DisposablePostgres[] = [];

// Test databases are thrown away: durability off makes cloning and committing cheap.
const startTestServer = (dir: string) =>
  startEmbeddedPostgres(dir, { noSync: true, settings: { synchronous_commit: 'off', full_page_writes: 'off' } });

/**
 * `count` embedded servers, each with the migrated template. initdb and the migrations run once (a
 * CPU second and more each, initdb's syncs besides): the others start from copies of that cluster,
 * taken while it is stopped (`cp -a` keeps the owner PostgreSQL runs as when tests run as root).
 */
async function startTestServers(count: number): Promise<{ server: EmbeddedPostgres; dir: string }[]> {
  const first = await serverReachableTempDir('task-service-test-pg-');
  const setUp = await startTestServer(first);
  await createTemplate(setUp.url);
  await setUp.stop();
  const dirs = [first];
  for (let i = 1; i < count; i++) {
    const dir = await serverReachableTempDir('task-service-test-pg-');
    await run('cp', ['-a', `${first}/.`, dir]);
    dirs.push(dir);
  }
  return Promise.all(dirs.map(async (dir) => ({ server: await startTestServer(dir), dir })));
}

/** Once per run: the embedded servers, and a migrated database on each server that every test file clones. */
export async function prepareTemplates(): Promise<void> {
  process.env.TEST_RUN_ID ??= `${process.pid}`;
  const count = Math.max(1, Number(process.env.TEST_SERVERS ?? 1));
  embedded = await startTestServers(count);
  process.env.TEST_EMBEDDED_URLS = embedded.map(({ server }) => server.url).join(',');
  // For the tests that need a server of the run beside their own database (process.test.ts).
  process.env.TEST_EMBEDDED_URL = embedded[0]?.server.url;
  if (process.env.TEST_DATABASE_URL) await createTemplate(process.env.TEST_DATABASE_URL);
  // Project "postgres": TEST_DATABASE_URL's version, a cluster per worker from its binaries (CI:
  // Debian's), for the same reason as the embedded servers; TEST_DATABASE_URL's server itself when
  // TEST_POSTGRES_BIN is not given.
  const bin = process.env.TEST_POSTGRES_BIN;
  if (process.env.TEST_DATABASE_URL && bin) {
    const settings = { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off', max_connections: '200' };
    clusters = await Promise.all(Array.from({ length: count }, () => disposablePostgres(bin, settings)));
    await Promise.all(clusters.map((cluster) => createTemplate(cluster.url)));
    process.env.TEST_POSTGRES_URLS = clusters.map((cluster) => cluster.url).join(',');
  }
}

/** After the run: the templates and the embedded servers go. */
export async function removeTemplates(): Promise<void> {
  if (process.env.TEST_DATABASE_URL) {
    await onServer(process.env.TEST_DATABASE_URL, (admin) =>
      admin.query(`DROP DATABASE IF EXISTS ${templateName()} WITH (FORCE)`),
    );
  }
  await Promise.all(clusters.splice(0).map((cluster) => cluster.remove()));
  await Promise.all(
    embedded.splice(0).map(async ({ server, dir }) => {
      await server.stop();
      await rm(dir, { recursive: true, force: true });
    }),
  );
}

/**
 * Once per run, after the build: a data directory as the service leaves its embedded default after
 * a first start (the cluster initdb made, the password file in keys/, the database migrated, the
 * server stopped cleanly), made by the built `migrate` command. Tests whose subject is not a first
 * start take copies of it (readyDataDir): initdb and the migrations cost a service's first start
 * over a second of CPU and seconds of waiting on a busy machine; a copy costs a tenth. No signing key is in it (migrate makes none; the first
 * service start on a copy generates that copy's own), and nothing else that copies could share.
 */
export async function prepareReadyDataDir(): Promise<void> {
  const dir = await serverReachableTempDir('task-service-test-ready-');
  process.env.TEST_READY_DATA_DIR = dir;
  // Test workers get the run's settings from vitest.config.ts; this process is not one of them.
  await runCli('migrate', [], dir, { NODE_ENV: 'test', TEST_EMBEDDED_POSTGRES_NO_SYNC: 'true' });
}

/** After the run: the ready data directory goes. */
export async function removeReadyDataDir(): Promise<void> {
  const dir = process.env.TEST_READY_DATA_DIR;
  if (dir) await rm(dir, { recursive: true, force: true });
}

/**
 * A data directory of the test's own (under `prefix`, where the server's account can reach it)
 * holding a copy of the run's ready one: its service starts without initdb and migrations. A copy
 * is the test's alone (its own cluster, socket and attachments), its server stopped.
 */
export async function readyDataDir(prefix: string): Promise<string> {
  const ready = process.env.TEST_READY_DATA_DIR;
  if (!ready) throw new Error('no ready data directory: global setup (test/support/global-setup.ts) makes one');
  const dir = await serverReachableTempDir(prefix);
  // `cp -a` keeps the owner PostgreSQL runs as when tests run as root.
  await run('cp', ['-a', `${ready}/.`, dir]);
  return dir;
}

export interface TestDatabase {
  db: Database;
  /** For tests that open a second handle on the same database (several instances): see openTestDatabase. */
  url: string;
  drop(): Promise<void>;
}

async function scratchDatabase(prefix: string, template?: string): Promise<{ url: string; drop(): Promise<void> }> {
  const server = postgresUrl();
  const name = `${prefix}_${randomUUID().replace(/-/g, '')}`;
  // On the run's own servers (durability off), the template's files copied as they are: a third
  // less CPU a clone than writing them again through the WAL page by page, the default since
  // PostgreSQL 15, which a durable server (TEST_DATABASE_URL's) keeps, as it spares a checkpoint.
  const clone = template ? ` TEMPLATE ${template}${onRunsOwnServer() ? ' STRATEGY FILE_COPY' : ''}` : '';
  await onServer(server, (admin) => admin.query(`CREATE DATABASE ${name}${clone}`));
  return {
    url: serviceUrl(name),
    drop: () =>
      onServer(server, (admin) => admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => undefined),
  };
}

/** A fresh, migrated database for one test file, cloned from the run's template. */
export async function freshDatabase(): Promise<TestDatabase> {
  const scratch = await scratchDatabase('task_service_test', templateName());
  const db = openTestDatabase(scratch.url);
  return {
    db,
    url: scratch.url,
    drop: async () => {
      await db.close();
      await scratch.drop();
    },
  };
}

/** An empty database on the server under test (nothing migrated), for comparing schemas. */
export async function emptyDatabase(): Promise<{ url: string; sql: SqlDatabase; drop(): Promise<void> }> {
  const scratch = await scratchDatabase('task_service_scratch');
  const pool = new pg.Pool({ connectionString: scratch.url, max: 1 });
  // drop() ends the pool, then drops the database WITH (FORCE): a session still closing is
  // terminated by the server, which reaches the pool as an 'error' with nobody left to hear it.
  pool.on('error', () => undefined);
  return {
    url: scratch.url,
    sql: pgSql(pool),
    drop: async () => {
      await pool.end();
      await scratch.drop();
    },
  };
}
