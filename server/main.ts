import cluster, { type Worker } from 'node:cluster';
import { once } from 'node:events';
import { pino, type Logger } from 'pino';
import { z } from 'zod';
import { closeContext, createContext } from './bootstrap.js';
import { runCommand } from './cli/run.js';
import { loadConfig, type Config } from './config.js';
import type { AppContext } from './context.js';
import { openDatabase, openPostgres } from './db/database.js';
import { migrate } from './db/migrate.js';
import { shareStreamSlotsWithWorkers } from './events/stream-slots.js';
import { shareMemoryLimiterWithWorkers } from './limits/request-limiter.js';
import { startMaintenance } from './maintenance.js';
import { OperatorError } from './operator-error.js';
import { onStopSignal, serve } from './serve.js';

// How the main process tells its workers where the database is (the embedded one's socket and password).
const WORKER_DATABASE_URL = 'TASK_SERVICE_WORKER_DATABASE_URL';

const StartupFailureSchema = z.object({ startupFailure: z.string() });

const listeningLine = (config: Config, port: number) => `task service listening on http://${config.host}:${port}`;

/** Closes what the main process holds, last: maintenance, the stores, then the database (and its embedded server). */
async function closeAll(logger: Logger, stopMaintenance: () => Promise<void>, ctx: AppContext): Promise<void> {
  try {
    await stopMaintenance();
    await closeContext(ctx);
    await ctx.db.close();
    logger.info('stopped');
  } catch (error) {
    logger.error({ err: error }, 'error while closing the database');
    process.exitCode = 1;
  }
}

/**
 * The main process: opens (or starts) the database, migrates, ensures the configured admin, runs
 * housekeeping, and serves HTTP itself (WEB_CONCURRENCY=1) or through worker processes that share
 * the port (Node's cluster), replacing any that dies.
 */
async function runMain(config: Config, logger: Logger): Promise<void> {
  const db = await openDatabase(config, { log: (message) => logger.info(message) });
  let stopMaintenance = () => Promise.resolve();
  let ctx: AppContext | undefined;
  try {
    const applied = await migrate(db.sql);
    logger.info({ database: db.kind, applied }, applied.length ? 'migrations applied' : 'database schema is current');
    const created = await createContext(config, db, logger);
    ctx = created;
    if (config.webConcurrency === 1) {
      const serving = await serve(ctx);
      stopMaintenance = startMaintenance(ctx);
      logger.info({ port: serving.port, database: db.kind, dataDir: config.dataDir }, listeningLine(config, serving.port));
      onStopSignal((signal) => {
        logger.info({ signal }, 'shutting down');
        void serving.close().then(() => closeAll(logger, stopMaintenance, created));
      });
      return;
    }
    const port = await startWorkers(config, logger, db.url);
    stopMaintenance = startMaintenance(ctx);
    logger.info({ port, workers: config.webConcurrency, database: db.kind, dataDir: config.dataDir }, listeningLine(config, port));
  } catch (error) {
    await stopMaintenance();
    if (ctx) await closeContext(ctx).catch(() => undefined);
    await db.close().catch(() => undefined);
    throw error;
  }
  const context = ctx;
  onStopSignal((signal) => {
    logger.info({ signal }, 'shutting down');
    const workers = Object.values(cluster.workers ?? {}).filter((worker): worker is Worker => worker !== undefined);
    void Promise.all(
      workers.map(async (worker) => {
        const exited = once(worker, 'exit');
        worker.process.kill('SIGTERM');
        await exited;
      }),
    ).then(() => closeAll(logger, stopMaintenance, context));
  });
}

/** Forks the workers and waits until every one listens; a worker that dies later is replaced. */
async function startWorkers(config: Config, logger: Logger, databaseUrl: string): Promise<number> {
  let stopping = false;
  onStopSignal(() => (stopping = true));
  shareMemoryLimiterWithWorkers(config);
  shareStreamSlotsWithWorkers(config.events);
  const fork = () => cluster.fork({ [WORKER_DATABASE_URL]: databaseUrl });
  const starting = Array.from({ length: config.webConcurrency }, () => {
    const worker = fork();
    return new Promise<number>((resolve, reject) => {
      let reason: string | undefined;
      worker.on('message', (message: unknown) => {
        const failure = StartupFailureSchema.safeParse(message);
        if (failure.success) reason = failure.data.startupFailure;
      });
      worker.once('listening', (address) => resolve(address.port));
      worker.once('exit', (code) => reject(reason ? new OperatorError(reason) : new Error(`a worker exited with code ${code} while starting`)));
    });
  });
  const ports = await Promise.all(starting);
  cluster.on('exit', (worker, code, signal) => {
    if (stopping) return;
    logger.error({ pid: worker.process.pid, code, signal }, 'worker died; starting another');
    fork();
  });
  return ports[0] ?? config.port;
}

/** A worker: its own connection pool on the main process's database, and the shared port. */
async function runWorker(config: Config, logger: Logger, databaseUrl: string): Promise<void> {
  const db = openPostgres(databaseUrl, { poolSize: config.databasePoolSize, statementTimeoutMs: config.databaseStatementTimeoutMs });
  try {
    // The admin, the signing key and the migrations are the main process's (done before forking).
    const ctx = await createContext({ ...config, admin: undefined }, db, logger);
    const serving = await serve(ctx);
    onStopSignal(() => {
      void serving.close().then(() => closeContext(ctx)).then(() => db.close()).finally(() => process.exit());
    });
  } catch (error) {
    await db.close().catch(() => undefined);
    // The main process says it, once, for all workers.
    if (!(error instanceof OperatorError)) throw error;
    process.send?.({ startupFailure: error.message }, () => process.exit(1));
  }
}

runCommand('task-service', async () => {
  const config = loadConfig();
  const logger = pino({ level: config.logLevel });
  const workerDatabaseUrl = process.env[WORKER_DATABASE_URL];
  if (cluster.isWorker && workerDatabaseUrl) await runWorker(config, logger, workerDatabaseUrl);
  else await runMain(config, logger);
});
