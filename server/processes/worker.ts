import type { Logger } from 'pino';
import { closeContext, createContext } from '../bootstrap.js';
import type { Config } from '../config.js';
import { openPostgres } from '../db/database.js';
import { whenStopping, type StopSignals } from '../lifecycle.js';
import { OperatorError } from '../operator-error.js';
import { serve } from '../serve.js';
import { DatabaseReadySchema, type WorkerMessage } from './messages.js';

function tellMainProcess(message: WorkerMessage, then?: () => void): void {
  process.send?.(message, undefined, undefined, then);
}

/** Asks the main process where the database is; it answers once the database is migrated. */
function databaseFromMainProcess(): Promise<string> {
  return new Promise((resolve) => {
    const onMessage = (message: unknown) => {
      const ready = DatabaseReadySchema.safeParse(message);
      if (!ready.success) return;
      process.off('message', onMessage);
      resolve(ready.data.databaseUrl);
    };
    process.on('message', onMessage);
    tellMainProcess({ awaitingDatabase: true });
  });
}

/** An HTTP worker: its code loaded while the main process starts the database, then its own pool on it, and the shared port. */
export async function runWorker(config: Config, logger: Logger, stops: StopSignals): Promise<void> {
  const databaseUrl = await stops.unlessStopped(databaseFromMainProcess());
  const db = openPostgres(databaseUrl, {
    poolSize: config.databasePoolSize,
    statementTimeoutMs: config.databaseStatementTimeoutMs,
    // The embedded server's URL is direct; DATABASE_URL may be a pooler.
    directUrl: config.databaseUrl === undefined ? databaseUrl : config.databaseDirectUrl,
  });
  try {
    // The admin, the signing key and the migrations are the main process's (done before it answers).
    const ctx = await stops.unlessStopped(createContext({ ...config, admin: undefined }, db, logger));
    const serving = await stops.unlessStopped(serve(ctx));
    whenStopping(stops, () => {
      void serving
        .close(stops.requestGraceMs())
        .then(() => closeContext(ctx))
        .then(() => db.close())
        .finally(() => process.exit());
    });
  } catch (error) {
    await db.close().catch(() => undefined);
    // The main process says it, once, for all workers.
    if (!(error instanceof OperatorError)) throw error;
    tellMainProcess({ startupFailure: error.message }, () => process.exit(1));
  }
}
