import cluster, { type Worker } from 'node:cluster';
import { once } from 'node:events';
import type { Logger } from 'pino';
import { checkConfiguredKey } from '../security/keys.js';
import type { Config } from '../config.js';
import type { AppContext } from '../context.js';
import type { Database } from '../db/database.js';
import { checkPortFree } from '../http/listen.js';
import { whenStopping, type StopSignals } from '../lifecycle.js';
import { exitOnceLogged } from '../logger.js';
import { OperatorError } from '../operator-error.js';
import { AwaitingDatabaseSchema, HTTP_WORKER_ENV, StartupFailureSchema, type MainProcessMessage } from './messages.js';

const listeningLine = (config: Config, port: number) => `task service listening on http://${config.host}:${port}`;

/** Whether `host` is reachable from this machine only. */
const isLoopback = (host: string) =>
  host === 'localhost' || host === '::1' || /^(?:::ffff:)?127\.\d+\.\d+\.\d+$/i.test(host);

/** The start-up line saying that anyone who can reach the service may create an account (nothing when they may not). */
export function registrationNotice(
  config: Config,
  port: number,
): { level: 'info' | 'warn'; message: string } | undefined {
  if (!config.registrationEnabled) return undefined;
  if (isLoopback(config.host))
    return {
      level: 'info',
      message: `registration is open: anyone who can reach http://${config.host}:${port} (on this machine) can create an account; REGISTRATION_ENABLED=false closes it`,
    };
  return {
    level: 'warn',
    message:
      `registration is open to anyone who can reach port ${port} of this machine over the network (HOST=${config.host}): ` +
      'set REGISTRATION_ENABLED=false to close it, or HOST=127.0.0.1 to serve this machine only',
  };
}

/** Says who may register, then where the service listens: the last line of a start. */
function sayListening(logger: Logger, config: Config, port: number, fields: Record<string, unknown>): void {
  const notice = registrationNotice(config, port);
  if (notice) logger[notice.level]({ host: config.host, port }, notice.message);
  logger.info({ port, ...fields }, listeningLine(config, port));
}

/** Closes what the main process holds, last: maintenance, the stores, then the database (and its embedded server). */
async function closeAll(logger: Logger, stopMaintenance: () => Promise<void>, ctx: AppContext): Promise<void> {
  try {
    await stopMaintenance();
    await (await import('./database-side.js')).closeContext(ctx);
    await ctx.db.close();
    logger.info('stopped');
  } catch (error) {
    logger.error({ err: error }, 'error while closing the database');
    process.exitCode = 1;
  }
}

/** Lets go of what a start that failed had opened, quietly: the failure is what is said. */
async function release(ctx: AppContext): Promise<void> {
  await (await import('./database-side.js')).closeContext(ctx).catch(() => undefined);
  await ctx.db.close().catch(() => undefined);
}

/** What can be checked without the database, before it starts: the port, the signing key. */
async function checkBeforeDatabase(config: Config): Promise<void> {
  await checkConfiguredKey(config.jwt.privateKeyPem);
  await checkPortFree(config.port, config.host);
}

/**
 * The main process: checks what needs no database, then opens (or starts) the database, migrates,
 * ensures the configured admin, runs housekeeping, and serves HTTP itself (WEB_CONCURRENCY=1) or
 * through worker processes that share the port (Node's cluster), replacing any that dies. The
 * workers are forked first: they load their code while this process loads its own and starts the
 * database. A stop signal at any moment ends it all.
 */
export async function runMain(config: Config, logger: Logger, stops: StopSignals): Promise<void> {
  await checkBeforeDatabase(config);
  stops.throwIfStopping();
  if (config.webConcurrency === 1) return serveAlone(config, logger, stops);
  const workers = forkWorkers(config, logger, stops);
  let prepared: { db: Database; ctx: AppContext } | undefined;
  let stopMaintenance = () => Promise.resolve();
  try {
    const side = await import('./database-side.js');
    prepared = await side.prepareDatabase(config, logger, stops);
    side.keepForWorkers(config, prepared.ctx);
    workers.databaseReady(prepared.db.url);
    const port = await stops.unlessStopped(workers.listening);
    stopMaintenance = side.startMaintenance(prepared.ctx);
    sayListening(logger, config, port, {
      workers: config.webConcurrency,
      database: prepared.db.kind,
      dataDir: config.dataDir,
    });
  } catch (error) {
    await stopWorkers();
    await stopMaintenance();
    if (prepared) await release(prepared.ctx);
    throw error;
  }
  const { ctx } = prepared;
  whenStopping(stops, (signal) => {
    logger.info({ signal }, 'shutting down');
    void stopWorkers()
      .then(() => closeAll(logger, stopMaintenance, ctx))
      .then(() => exitOnceLogged(logger));
  });
}

/** WEB_CONCURRENCY=1: this process serves HTTP itself; its HTTP code loads while the database starts. */
async function serveAlone(config: Config, logger: Logger, stops: StopSignals): Promise<void> {
  const loading = import('../serve.js');
  loading.catch(() => undefined); // awaited below, where a failure is thrown
  const side = await import('./database-side.js');
  const { db, ctx } = await side.prepareDatabase(config, logger, stops);
  let stopMaintenance = () => Promise.resolve();
  try {
    const { serve } = await loading;
    const serving = await stops.unlessStopped(serve(ctx));
    stopMaintenance = side.startMaintenance(ctx);
    sayListening(logger, config, serving.port, { database: db.kind, dataDir: config.dataDir });
    whenStopping(stops, (signal) => {
      logger.info({ signal }, 'shutting down');
      void serving
        .close(stops.requestGraceMs())
        .then(() => closeAll(logger, stopMaintenance, ctx))
        .then(() => exitOnceLogged(logger));
    });
  } catch (error) {
    await stopMaintenance();
    await release(ctx);
    throw error;
  }
}

// A worker that has exited stays in cluster.workers until its channel has closed too: waiting for
// its 'exit' again would wait for ever, and with nothing else left to wait on, this process would
// end there, with 0 and without a word (a stop signal to the process group ends the workers too).
const liveWorkers = () =>
  Object.values(cluster.workers ?? {}).filter((worker): worker is Worker => worker !== undefined && !worker.isDead());

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

function tellWorker(worker: Worker, message: MainProcessMessage): void {
  // A worker that died meanwhile is replaced (or the start fails); a send to it would be an unhandled error.
  if (worker.isConnected()) worker.send(message, undefined, undefined, () => undefined);
}

interface StartingWorkers {
  /** The port, once every worker listens; rejects when one exits first. */
  listening: Promise<number>;
  /** Answers the workers waiting for the database, and those that ask later (replacements). */
  databaseReady(url: string): void;
}

/** Forks the workers, which load their code and ask for the database; a worker that dies once all listen is replaced. */
function forkWorkers(config: Config, logger: Logger, stops: StopSignals): StartingWorkers {
  const fork = () => cluster.fork({ [HTTP_WORKER_ENV]: '1' });
  let databaseUrl: string | undefined;
  const waiting = new Set<Worker>();
  cluster.on('message', (worker: Worker, message: unknown) => {
    if (!AwaitingDatabaseSchema.safeParse(message).success) return;
    if (databaseUrl === undefined) waiting.add(worker);
    else tellWorker(worker, { databaseUrl });
  });
  const starting = Array.from({ length: config.webConcurrency }, () => {
    const worker = fork();
    return new Promise<number>((resolve, reject) => {
      let reason: string | undefined;
      worker.on('message', (message: unknown) => {
        const failure = StartupFailureSchema.safeParse(message);
        if (failure.success) reason = failure.data.startupFailure;
      });
      worker.once('listening', (address) => resolve(address.port));
      worker.once('exit', (code) =>
        reject(reason ? new OperatorError(reason) : new Error(`a worker exited with code ${code} while starting`)),
      );
    });
  });
  const listening = Promise.all(starting).then((ports) => {
    cluster.on('exit', (worker, code, signal) => {
      if (stops.signal.aborted) return;
      logger.error({ pid: worker.process.pid, code, signal }, 'worker died; starting another');
      fork();
    });
    return ports[0] ?? config.port;
  });
  listening.catch(() => undefined); // awaited once the database is ready, where a failure is thrown
  return {
    listening,
    databaseReady: (url) => {
      databaseUrl = url;
      for (const worker of waiting) tellWorker(worker, { databaseUrl: url });
      waiting.clear();
    },
  };
}
