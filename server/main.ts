import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { pino } from 'pino';
import { buildApp } from './app.js';
import { closeContext, createContext } from './bootstrap.js';
import { runCommand } from './cli/run.js';
import { loadConfig } from './config.js';
import { openDatabase } from './db/database.js';
import { migrate } from './db/migrate.js';
import { startMaintenance } from './maintenance.js';
import { OperatorError } from './operator-error.js';

const SHUTDOWN_GRACE_MS = 10_000;

/** Listens, or says in one line why it cannot. */
async function listen(server: Server, port: number, host: string): Promise<number> {
  server.listen(port, host);
  try {
    await once(server, 'listening');
  } catch (error) {
    const code = error instanceof Error && 'code' in error ? error.code : undefined;
    if (code === 'EADDRINUSE') throw new OperatorError(`Port ${port} on ${host} is in use: stop what listens there, or set PORT to another port.`);
    if (code === 'EACCES') throw new OperatorError(`Port ${port} on ${host} needs privileges this process lacks: set PORT to 1024 or above.`);
    if (code === 'EADDRNOTAVAIL') throw new OperatorError(`HOST ${host} is not an address of this machine: set HOST (0.0.0.0 for every interface).`);
    throw error;
  }
  const address = server.address();
  return typeof address === 'object' && address ? address.port : port;
}

runCommand('task-service', async () => {
  const config = loadConfig();
  const logger = pino({ level: config.logLevel });
  const db = await openDatabase(config, { log: (message) => logger.info(message) });
  let stopMaintenance: (() => Promise<void>) | undefined;
  try {
    const applied = await migrate(db.sql);
    logger.info({ database: db.kind, applied }, applied.length ? 'migrations applied' : 'database schema is current');
    const ctx = await createContext(config, db, logger);
    const server = createServer(buildApp(ctx));
    const port = await listen(server, config.port, config.host);
    stopMaintenance = startMaintenance(ctx);
    logger.info({ port, database: db.kind, dataDir: config.dataDir }, `task service listening on http://${config.host}:${port}`);

    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) return;
      stopping = true;
      logger.info({ signal }, 'shutting down');
      // In-flight requests may finish; connections still open after the grace period are cut.
      const force = setTimeout(() => server.closeAllConnections(), SHUTDOWN_GRACE_MS).unref();
      server.close(() => {
        clearTimeout(force);
        (stopMaintenance?.() ?? Promise.resolve())
          .then(() => closeContext(ctx))
          .then(() => db.close())
          .then(
            () => logger.info('stopped'),
            (error: unknown) => {
              logger.error({ err: error }, 'error while closing the database');
              process.exitCode = 1;
            },
          );
      });
      server.closeIdleConnections();
    };
    process.on('SIGTERM', () => stop('SIGTERM'));
    process.on('SIGINT', () => stop('SIGINT'));
  } catch (error) {
    await stopMaintenance?.();
    await db.close().catch(() => undefined);
    throw error;
  }
});
