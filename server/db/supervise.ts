import type { EmbeddedPostgres } from './embedded-postgres.js';

const CHECK_EVERY_MS = 1_000;
const FIRST_RETRY_MS = 500;
const MAX_RETRY_MS = 8_000;

export interface Supervision {
  /** `up` while the server's process lives; `restarting` from its death until it is back. */
  state(): 'up' | 'restarting';
  stop(): void;
}

/**
 * Watches the embedded PostgreSQL server's process and starts it again when it dies (or someone
 * stops it), retrying with backoff; `onRestarted` runs once it is back (sessions must be made anew).
 */
export function superviseEmbedded(
  server: EmbeddedPostgres,
  { log, onRestarted }: { log: (message: string) => void; onRestarted: () => Promise<void> },
): Supervision {
  let state: 'up' | 'restarting' = 'up';
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let retryMs = FIRST_RETRY_MS;
  const next = (ms: number) => {
    if (!stopped) timer = setTimeout(check, ms).unref();
  };
  const check = async () => {
    if (stopped) return;
    if (await server.isAlive()) {
      state = 'up';
      return next(CHECK_EVERY_MS);
    }
    if (state === 'up') log('the embedded PostgreSQL server is not running: starting it again');
    state = 'restarting';
    try {
      await server.restart();
      if (stopped) return;
      await onRestarted();
      state = 'up';
      retryMs = FIRST_RETRY_MS;
      log('the embedded PostgreSQL server runs again');
      next(CHECK_EVERY_MS);
    } catch (error) {
      log(
        `starting the embedded PostgreSQL server again failed (retrying in ${retryMs} ms): ${error instanceof Error ? error.message : String(error)}`,
      );
      next(retryMs);
      retryMs = Math.min(retryMs * 2, MAX_RETRY_MS);
    }
  };
  next(CHECK_EVERY_MS);
  return {
    state: () => state,
    stop: () => {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
