import cluster, { type Worker } from 'node:cluster';
import { once } from 'node:events';
import type { Logger } from 'pino';
import { z } from 'zod';
import { closeContext, createContext } from './bootstrap.js';
import { runCommand } from './cli/run.js';
import { loadConfig, type Config } from './config.js';
import { createLogger } from './logger.js';
import type { AppContext } from './context.js';
import { checkConfiguredKey } from './auth/keys.js';
import { onDirectConnection, openDatabase, openPostgres } from './db/database.js';
import { migrate } from './db/migrate.js';
import { shareStreamSlotsWithWorkers } from './events/stream-slots.js';
import { shareMemoryLimiterWithWorkers } from './limits/request-limiter.js';
import { startMaintenance } from './maintenance.js';
import { aggregateMetricsForWorkers } from './metrics/cluster.js';
import { mainProcessRegistries } from './metrics/instance.js';
import { OperatorError } from './operator-error.js';
import { listenForStopSignals, StartAborted, whenStopping, type StopSignals } from './lifecycle.js';
import { checkPortFree, serve } from './serve.js';

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

/** What can be checked without the database, before it starts: the port, the signing key. */
async function checkBeforeDatabase(config: Config): Promise<void> {
  await checkConfiguredKey(config.jwt.privateKeyPem);
  await checkPortFree(config.port, config.host);
}

/**
 * The main process: opens (or starts) the database, migrates, ensures the configured admin, runs
 * housekeeping, and serves HTTP itself (WEB_CONCURRENCY=1) or through worker processes that share
 * the port (Node's cluster), replacing any that dies. A stop signal at any moment ends it all.
 */
async function runMain(config: Config, logger: Logger, stops: StopSignals): Promise<void> {
  await checkBeforeDatabase(config);
  stops.throwIfStopping();
  const db = await openDatabase(config, { log: (message) => logger.info(message), signal: stops.signal });
  stops.onDeadline(() => db.stopNow?.());
  let stopMaintenance = () => Promise.resolve();
  let ctx: AppContext | undefined;
  try {
    stops.throwIfStopping();
    const applied = await stops.unlessStopped(onDirectConnection(db, (sql) => migrate(sql)));
    logger.info({ database: db.kind, applied }, applied.length ? 'migrations applied' : 'database schema is current');
    const created = await stops.unlessStopped(createContext(config, db, logger));
    ctx = created;
    if (config.webConcurrency === 1) {
      const serving = await stops.unlessStopped(serve(ctx));
      stopMaintenance = startMaintenance(ctx);
      logger.info({ port: serving.port, database: db.kind, dataDir: config.dataDir }, listeningLine(config, serving.port));
      whenStopping(stops, (signal) => {
        logger.info({ signal }, 'shutting down');
        void serving.close(stops.requestGraceMs()).then(() => closeAll(logger, stopMaintenance, created)).then(() => process.exit());
      });
      return;
    }
    aggregateMetricsForWorkers(mainProcessRegistries(created));
    const port = await startWorkers(config, logger, db.url, stops);
    stopMaintenance = startMaintenance(ctx);
    logger.info({ port, workers: config.webConcurrency, database: db.kind, dataDir: config.dataDir }, listeningLine(config, port));
  } catch (error) {
    await stopMaintenance();
    if (ctx) await closeContext(ctx).catch(() => undefined);
    await db.close().catch(() => undefined);
    throw error;
  }
  const context = ctx;
  whenStopping(stops, (signal) => {
    logger.info({ signal }, 'shutting down');
    void stopWorkers().then(() => closeAll(logger, stopMaintenance, context)).then(() => process.exit());
  });
}

const liveWorkers = () => Object.values(cluster.workers ?? {}).filter((worker): worker is Worker => worker !== undefined);

/** Asks every worker to stop (each lets its requests finish) and waits until all have exited. */
function stopWorkers(): Promise<void> {
  return Promise.all(
    liveWorkers().map(async (worker) => {
      const exited = once(worker, 'exit');
      worker.process.kill('SIGTERM');
      await exited;
    }),
  ).then(() => undefined);
}

/** Forks the workers and waits until every one listens; a worker that dies later is replaced. */
async function startWorkers(config: Config, logger: Logger, databaseUrl: string, stops: StopSignals): Promise<number> {
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
  starting.forEach((worker) => worker.catch(() => undefined));
  const ports = await stops.unlessStopped(Promise.all(starting)).catch(async (error: unknown) => {
    await stopWorkers();
    throw error;
  });
  cluster.on('exit', (worker, code, signal) => {
    if (stops.signal.aborted) return;
    logger.error({ pid: worker.process.pid, code, signal }, 'worker died; starting another');
    fork();
  });
  return ports[0] ?? config.port;
}

/** A worker: its own connection pool on the main process's database, and the shared port. */
async function runWorker(config: Config, logger: Logger, databaseUrl: string, stops: StopSignals): Promise<void> {
  const db = openPostgres(databaseUrl, {
    poolSize: config.databasePoolSize,
    statementTimeoutMs: config.databaseStatementTimeoutMs,
    // The embedded server's URL is direct; DATABASE_URL may be a pooler.
    directUrl: config.databaseUrl === undefined ? databaseUrl : config.databaseDirectUrl,
  });
  try {
    // The admin, the signing key and the migrations are the main process's (done before forking).
    const ctx = await stops.unlessStopped(createContext({ ...config, admin: undefined }, db, logger));
    const serving = await stops.unlessStopped(serve(ctx));
    whenStopping(stops, () => {
      void serving.close(stops.requestGraceMs()).then(() => closeContext(ctx)).then(() => db.close()).finally(() => process.exit());
    });
  } catch (error) {
    await db.close().catch(() => undefined);
    // The main process says it, once, for all workers.
    if (!(error instanceof OperatorError)) throw error;
    process.send?.({ startupFailure: error.message }, () => process.exit(1));
  }
}

// From the first moment: a signal during start-up stops the start (and the embedded server).
const stops = listenForStopSignals();
runCommand('task-service', async () => {
  const config = loadConfig();
  const logger = createLogger(config.logLevel);
  const workerDatabaseUrl = process.env[WORKER_DATABASE_URL];
  try {
    if (cluster.isWorker && workerDatabaseUrl) await runWorker(config, logger, workerDatabaseUrl, stops);
    else await runMain(config, logger, stops);
  } catch (error) {
    if (!(error instanceof StartAborted)) throw error;
    logger.info({ signal: error.signal }, 'stopped while starting');
    process.exit(0);
  }
});
