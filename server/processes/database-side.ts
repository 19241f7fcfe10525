// The main process's work beside serving HTTP: the database, its migrations, the context that
// housekeeping runs with, and what it keeps for its workers. Loaded once the workers are forked.
import type { Logger } from 'pino';
import { assertNoUnfinishedRestore } from '../backup/restore-marker.js';
import { closeContext, createContext } from '../bootstrap.js';
import type { Config } from '../config.js';
import type { AppContext } from '../context.js';
import { onDirectConnection, openDatabase, type Database } from '../db/database.js';
import { migrate } from '../db/migrate.js';
import { shareStreamSlotsWithWorkers } from '../events/stream-slots.js';
import type { StopSignals } from '../lifecycle.js';
import { shareMemoryLimiterWithWorkers } from '../limits/request-limiter.js';
import { startMaintenance } from '../maintenance.js';
import { aggregateMetricsForWorkers } from '../metrics/cluster.js';
import { mainProcessRegistries } from '../metrics/instance.js';

export { closeContext, startMaintenance };

/** Opens (or starts) the database, migrates it and builds the main process's context (the admin among it). */
export async function prepareDatabase(
  config: Config,
  logger: Logger,
  stops: StopSignals,
): Promise<{ db: Database; ctx: AppContext }> {
  const db = await openDatabase(config, {
    log: (message) => logger.info(message),
    signal: stops.signal,
    atForcedExit: stops.atForcedExit,
  });
  try {
    stops.throwIfStopping();
    // A restore cut short left rows missing and the event log unreadable: never serve that.
    await stops.unlessStopped(assertNoUnfinishedRestore(db.sql));
    const applied = await stops.unlessStopped(onDirectConnection(db, (sql) => migrate(sql)));
    logger.info({ database: db.kind, applied }, applied.length ? 'migrations applied' : 'database schema is current');
    return { db, ctx: await stops.unlessStopped(createContext(config, db, logger)) };
  } catch (error) {
    await db.close().catch(() => undefined);
    throw error;
  }
}

/**
 * What the workers share through the main process: the memory rate limit's counts, the event
 * stream slots, the metrics. Set up before any worker can ask (they ask only once they serve,
 * and they serve only after the main process told them where the database is).
 */
export function keepForWorkers(config: Config, ctx: AppContext): void {
  shareMemoryLimiterWithWorkers(config);
  shareStreamSlotsWithWorkers(config.events);
  aggregateMetricsForWorkers(mainProcessRegistries(ctx));
}
