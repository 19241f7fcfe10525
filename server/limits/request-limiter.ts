import cluster from 'node:cluster';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import {
  RateLimiterCluster,
  RateLimiterClusterMaster,
  RateLimiterMemory,
  RateLimiterPostgres,
  RateLimiterRedis,
  type RateLimiterAbstract,
} from 'rate-limiter-flexible';
import type { Config } from '../config.js';
import type { SqlSession } from '../db/sql.js';
import { OperatorError } from '../operator-error.js';

const WINDOW_SECONDS = 60;
const KEY_PREFIX = 'request';
const REDIS_CONNECT_MS = 5_000;

/** The Redis named by REDIS_URL cannot be reached at start; the start stops with this line. */
export class RateLimitStoreUnavailableError extends OperatorError {}

/** The general request budget and where it is counted; `close` lets go of the store's connection. */
export interface RequestLimiter {
  limiter: RateLimiterAbstract;
  close(): Promise<void>;
}

/**
 * rate-limiter-flexible's PostgreSQL store speaks to a pg-like client; this one runs on the service's
 * pool. The store reads the rows of its own statements itself (its client is typed `any`).
 */
function pgLikeClient(sql: SqlSession) {
  return {
    query: async ({ text, values }: { text: string; values?: unknown[] }) => {
      const rows = await sql.rows(text, values);
      return { rows, rowCount: rows.length };
    },
  };
}

async function connectedRedis(url: string, logger: Logger): Promise<Redis> {
  // Loaded only where Redis is configured.
  const { Redis } = await import('ioredis');
  // Fail fast while Redis is away (the memory insurance counts meanwhile) rather than queue requests.
  const redis = new Redis(url, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: REDIS_CONNECT_MS,
  });
  let reachable = true;
  redis.on('error', (error: unknown) => {
    if (reachable)
      logger.warn({ err: error }, 'Redis for the rate limit is unreachable; each instance counts on its own meanwhile');
    reachable = false;
  });
  redis.on('ready', () => {
    if (!reachable) logger.info('Redis for the rate limit is reachable again');
    reachable = true;
  });
  try {
    await redis.connect();
    await redis.ping();
    return redis;
  } catch (error) {
    redis.disconnect();
    const reason = error instanceof Error ? error.message : String(error);
    throw new RateLimitStoreUnavailableError(`Rate limit store: Redis at REDIS_URL is not reachable: ${reason}`);
  }
}

/**
 * The general request rate limit the configuration asks for: none (0 a minute), per instance in
 * memory, or shared by every instance in PostgreSQL or Redis.
 */
export async function openRequestLimiter(
  config: Pick<Config, 'rateLimitPerMinute' | 'rateLimitStore'>,
  sql: SqlSession,
  logger: Logger,
): Promise<RequestLimiter | undefined> {
  const points = config.rateLimitPerMinute;
  if (points === 0) return undefined;
  const common = { points, duration: WINDOW_SECONDS, keyPrefix: KEY_PREFIX };
  const store = config.rateLimitStore;
  switch (store.kind) {
    case 'memory':
      // HTTP workers of one instance count together, in the main process's memory.
      return {
        limiter: cluster.isWorker ? new RateLimiterCluster(common) : new RateLimiterMemory(common),
        close: () => Promise.resolve(),
      };
    case 'postgres':
      return {
        // The table comes from the migrations; expired rows are cleared by the limiter itself.
        limiter: new RateLimiterPostgres({
          ...common,
          storeClient: pgLikeClient(sql),
          storeType: 'client',
          tableName: 'request_rate_limits',
          tableCreated: true,
        }),
        close: () => Promise.resolve(),
      };
    case 'redis': {
      const redis = await connectedRedis(store.url, logger);
      return {
        limiter: new RateLimiterRedis({
          ...common,
          storeClient: redis,
          rejectIfRedisNotReady: true,
          insuranceLimiter: new RateLimiterMemory(common),
        }),
        close: async () => {
          await redis.quit().catch(() => redis.disconnect());
        },
      };
    }
  }
}

/** In the main process of several HTTP workers: keeps the memory store's counts for all of them. */
export function shareMemoryLimiterWithWorkers(config: Pick<Config, 'rateLimitPerMinute' | 'rateLimitStore'>): void {
  if (config.rateLimitPerMinute > 0 && config.rateLimitStore.kind === 'memory') new RateLimiterClusterMaster();
}
