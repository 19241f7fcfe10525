import { once } from 'node:events';
import { pino } from 'pino';
import { buildApp } from './app.js';
import { createContext } from './bootstrap.js';
import { ConfigError, loadConfig } from './config.js';
import { DataDirLockedError, openDatabase, type Database } from './db/database.js';
import { migrate, MigrationError } from './db/migrate.js';
import { startMaintenance } from './maintenance.js';
import { AdminEmailTakenError } from './users/accounts.js';

const SHUTDOWN_GRACE_MS = 10_000;

async function main(): Promise<void> {
  const config = loadConfig();
  const logger = pino({ level: config.logLevel });
  const db: Database = await openDatabase(config);
  try {
    const applied = await migrate(db.sql);
    logger.info({ database: db.kind, applied }, applied.length ? 'migrations applied' : 'database schema is current');
    const ctx = await createContext(config, db, logger);
    const stopMaintenance = startMaintenance(ctx);
    const server = buildApp(ctx).listen(config.port, config.host);
    await once(server, 'listening');
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : config.port;
    logger.info({ port, database: db.kind, dataDir: config.dataDir }, `task service listening on http://${config.host}:${port}`);

    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) return;
      stopping = true;
      logger.info({ signal }, 'shutting down');
      const force = setTimeout(() => server.closeAllConnections(), SHUTDOWN_GRACE_MS).unref();
      server.close(() => {
        clearTimeout(force);
        stopMaintenance().then(() => db.close()).then(
          () => logger.info('stopped'),
          (error: unknown) => logger.error({ err: error }, 'error while closing the database'),
        );
      });
      server.closeIdleConnections();
    };
    process.on('SIGTERM', () => stop('SIGTERM'));
    process.on('SIGINT', () => stop('SIGINT'));
  } catch (error) {
    await db.close().catch(() => undefined);
    throw error;
  }
}

main().catch((error: unknown) => {
  // Known start-up failures get their message alone; anything else its stack, for the operator.
  const known =
    error instanceof ConfigError || error instanceof DataDirLockedError || error instanceof MigrationError || error instanceof AdminEmailTakenError;
  console.error(known ? `task-service: ${error.message}` : error);
  process.exitCode = 1;
});
