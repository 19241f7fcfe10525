import pg from 'pg';
import { z } from 'zod';
import { StartAborted } from '../lifecycle.js';
import { OperatorError } from '../operator-error.js';
import { checkedRows } from './checked-rows.js';
import { startEmbeddedPostgres, type EmbeddedPostgresOptions } from './embedded-postgres.js';
import { pgSql, type SqlDatabase } from './sql.js';
import { boundedPool, keptConnectionPool } from './statement-timeout.js';
import { superviseEmbedded } from './supervise.js';

export interface Database {
  /** Where the data lives, for logs: the service's own server in DATA_DIR, or DATABASE_URL's. */
  kind: 'embedded' | 'external';
  /** A connection string, for the few parts that need a connection of their own. */
  url: string;
  /**
   * A connection string that reaches PostgreSQL itself, not through a transaction pooler: for
   * `LISTEN` and migrations. The embedded server's, or DATABASE_DIRECT_URL; undefined when only
   * DATABASE_URL is known, which may be a pooler (then events are polled for).
   */
  directUrl: string | undefined;
  sql: SqlDatabase;
  /** The connection pool's state now, for /metrics. */
  poolStats(): PoolStats;
  close(): Promise<void>;
  /** The embedded server's supervision: `restarting` while its process is dead and being started again. */
  serverState?: () => 'up' | 'restarting';
}

export interface PoolStats {
  max: number;
  open: number;
  idle: number;
  /** Queries waiting for a connection. */
  waiting: number;
}

/** A start-up failure of the database, said in one line. */
export class DatabaseStartError extends OperatorError {}

export class DataDirLockedError extends DatabaseStartError {
  constructor(dataDir: string, holder: string | undefined) {
    super(
      `The data directory ${dataDir} is in use by another process of this service${holder ? ` (${holder})` : ''}. ` +
        'Stop that process first, or give this one another DATA_DIR.',
    );
  }
}

export interface PostgresOptions {
  poolSize: number;
  /** Bounds every statement (PostgreSQL cancels it with 57014, which requests answer as 503). */
  statementTimeoutMs?: number;
  /** See Database.directUrl. */
  directUrl?: string;
  kind?: Database['kind'];
  onClose?: () => Promise<void>;
}

/**
 * A pool whose clients may lose their server (killed, restarted, failed over) without crashing the
 * process: pg emits 'error' on a client whose connection breaks, idle (the pool's listener) or
 * checked out (no listener of pg's own, and a pipelined client does so even with queries pending).
 * The queries in flight are rejected either way, and the pool opens a fresh connection next time.
 */
function resilientPool(options: pg.PoolConfig): pg.Pool {
  const pool = new pg.Pool(options);
  pool.on('error', () => undefined);
  pool.on('connect', (client) => client.on('error', () => undefined));
  return pool;
}

export function openPostgres(
  url: string,
  { poolSize, statementTimeoutMs, directUrl, kind = 'external', onClose }: PostgresOptions,
): Database {
  // A direct URL equal to the pool's says the pool is direct too (README: DATABASE_DIRECT_URL).
  const direct = directUrl === url;
  // On a direct connection the statement timeout is the session's (a start-up parameter), and a
  // statement runs alone; through a pooler, where a session is nobody's, every transaction sets it
  // (statement-timeout.ts).
  const perTransaction = direct ? undefined : statementTimeoutMs;
  // Pipelined: a transaction's BEGIN, its statements and its COMMIT leave together.
  const pool = resilientPool({
    connectionString: url,
    max: poolSize,
    pipeline: statementTimeoutMs !== undefined,
    ...(direct && statementTimeoutMs !== undefined && { statement_timeout: statementTimeoutMs }),
  });
  // What every query goes through: the timeout set per transaction where a pooler may be in front.
  const queries = perTransaction === undefined ? keptConnectionPool(pool) : boundedPool(pool, perTransaction);
  return {
    kind,
    url,
    directUrl,
    sql: pgSql(queries, { statementTimeoutMs: perTransaction, direct }),
    poolStats: () => ({ max: poolSize, open: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    close: async () => {
      await pool.end();
      await onClose?.();
    },
  };
}

/**
 * What a failed first connection means, for the operator. An answer from the server (or from a
 * pooler in front of it, such as PgBouncer's "unsupported startup parameter") is quoted as it came.
 */
function describeConnectError(error: unknown, url: string, variable = 'DATABASE_URL'): string {
  const code = error instanceof Error && 'code' in error ? String(error.code) : undefined;
  const { hostname, port, pathname } = new URL(url);
  const where = `${hostname || 'localhost'}:${port || 5432}${pathname}`;
  if (code === '28P01' || code === '28000') return `PostgreSQL at ${where} refused the credentials in ${variable}.`;
  if (code === '3D000') return `PostgreSQL at ${where} has no such database: create it, or fix ${variable}.`;
  if (error instanceof pg.DatabaseError)
    return `PostgreSQL at ${where} (${variable}) refused the connection: ${error.message} (${error.code ?? 'no code'}).`;
  const reason = code ?? (error instanceof Error ? error.message : String(error));
  return `Cannot reach PostgreSQL at ${where} (${reason}): is the server running, and is ${variable} right?`;
}

/**
 * Runs `work` (migrations) on a connection of its own to PostgreSQL itself when a direct URL is
 * known and differs from the pool's, else on the pool: migrations need no session state either.
 */
export async function onDirectConnection<T>(db: Database, work: (sql: SqlDatabase) => Promise<T>): Promise<T> {
  if (db.directUrl === undefined || db.directUrl === db.url) return work(db.sql);
  const pool = resilientPool({ connectionString: db.directUrl, max: 1 });
  try {
    await pool.query('SELECT 1').catch((error: unknown) => {
      throw new DatabaseStartError(describeConnectError(error, db.directUrl ?? '', 'DATABASE_DIRECT_URL'));
    });
    return await work(pgSql(pool));
  } finally {
    await pool.end();
  }
}

/** A row of `SELECT pg_try_advisory_lock(…) AS locked`. */
const Locked = z.object({ locked: z.boolean() });

// Any constant: the session-level advisory lock that one service process holds on its data directory.
const DATA_DIR_LOCK_KEY = 7_231_004_119;

/**
 * Holds the data directory for this process: an advisory lock on a connection kept open for the
 * process's life. A killed process's connection closes with it, so the lock never goes stale.
 */
export async function lockDataDir(url: string, dataDir: string): Promise<() => Promise<void>> {
  const client = new pg.Client({ connectionString: url, application_name: `task-service pid ${process.pid}` });
  client.on('error', () => undefined);
  await client.connect();
  // A killed predecessor's session may take a moment to end on the server.
  for (let attempt = 0; attempt < 10; attempt++) {
    const rows = await checkedRows(client, Locked, 'SELECT pg_try_advisory_lock($1) AS locked', [DATA_DIR_LOCK_KEY]);
    if (rows[0]?.locked) return () => client.end();
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  const rows = await checkedRows(
    client,
    // Only for the message: a holder the view shows as null goes unnamed.
    z.object({ holder: z.string().nullable() }),
    `SELECT a.application_name AS holder FROM pg_locks l JOIN pg_stat_activity a USING (pid)
      WHERE l.locktype = 'advisory' AND l.granted AND ((l.classid::bigint << 32) | l.objid::bigint) = $1`,
    [DATA_DIR_LOCK_KEY],
  );
  await client.end();
  throw new DataDirLockedError(dataDir, rows[0]?.holder ?? undefined);
}

export interface DatabaseConfig {
  databaseUrl: string | undefined;
  databaseDirectUrl?: string;
  databasePoolSize: number;
  databaseStatementTimeoutMs?: number;
  dataDir: string;
  /** Test only: the embedded server without syncs. */
  embeddedPostgresNoSync?: boolean;
}

/**
 * The database the configuration names: DATABASE_URL's server, or else the PostgreSQL server the
 * service runs for itself in DATA_DIR/postgres (started here, stopped by close()).
 */
export async function openDatabase(config: DatabaseConfig, embedded: EmbeddedPostgresOptions = {}): Promise<Database> {
  if (config.databaseUrl) {
    const db = openPostgres(config.databaseUrl, {
      poolSize: config.databasePoolSize,
      statementTimeoutMs: config.databaseStatementTimeoutMs,
      directUrl: config.databaseDirectUrl,
    });
    try {
      await db.sql.rows('SELECT 1');
    } catch (error) {
      await db.close().catch(() => undefined);
      throw new DatabaseStartError(describeConnectError(error, config.databaseUrl));
    }
    return db;
  }
  const server = await startEmbeddedPostgres(config.dataDir, { ...embedded, noSync: config.embeddedPostgresNoSync });
  // A server this process started is its own to stop; one it found running belongs to the process
  // that holds the lock (a second service refuses to start), or is adopted once the lock is ours.
  let unlock = await lockDataDir(server.url, config.dataDir).catch(async (error: unknown) => {
    if (!server.adopted) await server.stop().catch(() => undefined);
    throw error;
  });
  if (server.adopted) {
    embedded.log?.('adopting the embedded PostgreSQL left running by an earlier process');
    embedded.atForcedExit?.(server.stopNow);
  }
  const supervision = superviseEmbedded(server, {
    log: embedded.log ?? (() => undefined),
    // The lock's session ended with the server: take the lock again.
    onRestarted: async () => {
      await unlock().catch(() => undefined);
      unlock = await lockDataDir(server.url, config.dataDir);
    },
  });
  const close = async () => {
    supervision.stop();
    await unlock().catch(() => undefined);
    await server.stop();
  };
  if (embedded.signal?.aborted) {
    await close();
    throw new StartAborted(String(embedded.signal.reason));
  }
  const db = openPostgres(server.url, {
    poolSize: config.databasePoolSize,
    statementTimeoutMs: config.databaseStatementTimeoutMs,
    directUrl: server.url,
    kind: 'embedded',
    onClose: close,
  });
  return { ...db, serverState: supervision.state };
}
