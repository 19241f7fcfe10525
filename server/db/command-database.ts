import { openDatabase, lockDataDir, openPostgres, type Database, type DatabaseConfig } from './database.js';
import type { LastStep } from '../lifecycle.js';
import { runningServerUrl, startEmbeddedPostgres } from './embedded-postgres.js';

export interface CommandDatabaseOptions {
  /** The command needs the service stopped (it holds the data directory for its whole run). */
  exclusive: boolean;
  /** A stop signal: an embedded server being started for the command is stopped again. */
  signal?: AbortSignal;
  /** Where an embedded server started for the command registers its stop for a forced exit. */
  atForcedExit?: (step: LastStep) => void;
}

/**
 * The configured database for a command (create-admin, migrate, dump, restore) run beside the service. DATABASE_URL's
 * server as it is; on the embedded default, the server the running service started (reached over
 * its socket with the password in DATA_DIR, and left running), or else one started for the command
 * and stopped when it closes (or at a forced exit). `exclusive` holds the data directory like the service does, so the
 * command refuses to run while the service uses it, and the service refuses to start meanwhile.
 */
export async function openDatabaseForCommand(
  config: DatabaseConfig,
  { exclusive, signal, atForcedExit }: CommandDatabaseOptions,
): Promise<Database> {
  if (config.databaseUrl) return openDatabase(config);
  if (!exclusive) {
    // The running service's server, through its socket: no second server, and its lock left alone.
    const running = await runningServerUrl(config.dataDir);
    if (running) return openPostgres(running, { poolSize: 2, kind: 'embedded', directUrl: running });
  }
  // A command forced to exit stops a server it started (from the moment it spawns), never one it found running.
  const server = await startEmbeddedPostgres(config.dataDir, {
    signal,
    atForcedExit,
    noSync: config.embeddedPostgresNoSync,
  });
  const release = async (unlock?: () => Promise<void>) => {
    await unlock?.();
    if (!server.adopted) await server.stop();
  };
  let unlock: (() => Promise<void>) | undefined;
  if (exclusive || !server.adopted) {
    // A server we started is ours until we stop it: a service starting meanwhile must not adopt it.
    unlock = await lockDataDir(server.url, config.dataDir).catch(async (error: unknown) => {
      await release();
      throw error;
    });
  }
  return openPostgres(server.url, {
    poolSize: 2,
    kind: 'embedded',
    directUrl: server.url,
    onClose: () => release(unlock),
  });
}
