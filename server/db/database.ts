import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import { PrismaClient } from '../generated/prisma/client.js';
import { StartAborted } from '../lifecycle.js';
import { OperatorError } from '../operator-error.js';
import { runningServerUrl, startEmbeddedPostgres, type EmbeddedPostgresOptions } from './embedded-postgres.js';
import { pgSql, type SqlDatabase } from './sql.js';
import { superviseEmbedded } from './supervise.js';

export type { PrismaClient };

export interface Database {
  /** Where the data lives, for logs: the service's own server in DATA_DIR, or DATABASE_URL's. */
  kind: 'embedded' | 'external';
  /** A connection string, for the few parts that need a connection of their own. */
  url: string;
  prisma: PrismaClient;
  sql: SqlDatabase;
  close(): Promise<void>;
  /** The embedded server's supervision: `restarting` while its process is dead and being started again. */
  serverState?: () => 'up' | 'restarting';
  /** Stops the embedded server at once (a process that must exit now); nothing for an external one. */
  stopNow?: () => void;
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
  kind?: Database['kind'];
  onClose?: () => Promise<void>;
}

export function openPostgres(url: string, { poolSize, statementTimeoutMs, kind = 'external', onClose }: PostgresOptions): Database {
  const pool = new pg.Pool({ connectionString: url, max: poolSize, statement_timeout: statementTimeoutMs });
  // An idle client losing its connection must not crash the process; the next query reconnects.
  pool.on('error', () => undefined);
  const prisma = new PrismaClient({ adapter: new PrismaPg(pool) });
  return {
    kind,
    url,
    prisma,
    sql: pgSql(pool),
    close: async () => {
      await prisma.$disconnect();
      await pool.end();
      await onClose?.();
    },
  };
}

/** What a failed first connection means, for the operator. */
function describeConnectError(error: unknown, url: string): string {
  const code = error instanceof Error && 'code' in error ? String(error.code) : undefined;
  const { hostname, port, pathname } = new URL(url);
  const where = `${hostname || 'localhost'}:${port || 5432}${pathname}`;
  if (code === '28P01' || code === '28000') return `PostgreSQL at ${where} refused the credentials in DATABASE_URL.`;
  if (code === '3D000') return `PostgreSQL at ${where} has no such database: create it, or fix DATABASE_URL.`;
  const reason = code ?? (error instanceof Error ? error.message : String(error));
  return `Cannot reach PostgreSQL at ${where} (${reason}): is the server running, and is DATABASE_URL right?`;
}

// Any constant: the session-level advisory lock that one service process holds on its data directory.
const DATA_DIR_LOCK_KEY = 7_231_004_119;

/**
 * Holds the data directory for this process: an advisory lock on a connection kept open for the
 * process's life. A killed process's connection closes with it, so the lock never goes stale.
 */
async function lockDataDir(url: string, dataDir: string): Promise<() => Promise<void>> {
  const client = new pg.Client({ connectionString: url, application_name: `task-service pid ${process.pid}` });
  client.on('error', () => undefined);
  await client.connect();
  // A killed predecessor's session may take a moment to end on the server.
  for (let attempt = 0; attempt < 10; attempt++) {
    const { rows } = await client.query<{ locked: boolean }>('SELECT pg_try_advisory_lock($1) AS locked', [DATA_DIR_LOCK_KEY]);
    if (rows[0]?.locked) return () => client.end();
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  const { rows } = await client.query<{ holder: string }>(
    `SELECT a.application_name AS holder FROM pg_locks l JOIN pg_stat_activity a USING (pid)
      WHERE l.locktype = 'advisory' AND l.granted AND ((l.classid::bigint << 32) | l.objid::bigint) = $1`,
    [DATA_DIR_LOCK_KEY],
  );
  await client.end();
  throw new DataDirLockedError(dataDir, rows[0]?.holder);
}

export interface DatabaseConfig {
  databaseUrl: string | undefined;
  databasePoolSize: number;
  databaseStatementTimeoutMs?: number;
  dataDir: string;
}

/**
 * The database the configuration names: DATABASE_URL's server, or else the PostgreSQL server the
 * service runs for itself in DATA_DIR/postgres (started here, stopped by close()).
 */
export async function openDatabase(config: DatabaseConfig, embedded: EmbeddedPostgresOptions = {}): Promise<Database> {
  if (config.databaseUrl) {
    const db = openPostgres(config.databaseUrl, { poolSize: config.databasePoolSize, statementTimeoutMs: config.databaseStatementTimeoutMs });
    try {
      await db.sql.rows('SELECT 1');
    } catch (error) {
      await db.close().catch(() => undefined);
      throw new DatabaseStartError(describeConnectError(error, config.databaseUrl));
    }
    return db;
  }
  const server = await startEmbeddedPostgres(config.dataDir, embedded);
  // On failure the server is left running: it belongs to the process that holds the lock.
  let unlock = await lockDataDir(server.url, config.dataDir);
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
    kind: 'embedded',
    onClose: close,
  });
  return { ...db, serverState: supervision.state, stopNow: server.stopNow };
}

/**
 * The database for a command (create-admin, migrate): the embedded server a running service holds,
 * through its socket (no second server is started, and the service's lock is left alone), or else
 * what openDatabase opens.
 */
export async function openDatabaseForCommand(config: DatabaseConfig): Promise<Database> {
  const running = config.databaseUrl ? undefined : await runningServerUrl(config.dataDir);
  if (!running) return openDatabase(config);
  return openPostgres(running, { poolSize: 2, kind: 'embedded' });
}
