import type { SqlSession } from '../server/db/sql.js';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../server/config.js';
import { tables } from '../server/db/query.js';
import { OperatorError } from '../server/operator-error.js';
import { openRequestLimiter, RateLimitStoreUnavailableError } from '../server/limits/request-limiter.js';
import { startService } from './support/app.js';

const silent = pino({ level: 'silent' });
/** The memory and Redis stores never touch the database. */
// These tests never reach the database: a session that answers nothing.
const noSql: SqlSession = {
  exec: () => Promise.resolve(),
  rows: () => Promise.resolve([]),
  all: () => Promise.resolve([]),
  first: () => Promise.resolve(undefined),
  write: () => Promise.resolve(0),
};

describe('RATE_LIMIT_STORE', () => {
  it('defaults to memory and names what it lacks', () => {
    expect(loadConfig({}).rateLimitStore).toEqual({ kind: 'memory' });
    expect(loadConfig({ RATE_LIMIT_STORE: 'postgres' }).rateLimitStore).toEqual({ kind: 'postgres' });
    expect(loadConfig({ RATE_LIMIT_STORE: 'redis', REDIS_URL: 'redis://cache:6379/2' }).rateLimitStore).toEqual({
      kind: 'redis',
      url: 'redis://cache:6379/2',
    });
    expect(() => loadConfig({ RATE_LIMIT_STORE: 'redis' })).toThrow(
      /^Invalid configuration: REDIS_URL is required when RATE_LIMIT_STORE=redis$/,
    );
    expect(() => loadConfig({ RATE_LIMIT_STORE: 'redis', REDIS_URL: 'http://cache' })).toThrow(
      /REDIS_URL must be a redis:\/\/ or rediss:\/\/ URL/,
    );
    expect(() => loadConfig({ RATE_LIMIT_STORE: 'memcached' })).toThrow(ConfigError);
  });

  it('stops the start with one line when Redis is not there', async () => {
    const config = loadConfig({ RATE_LIMIT_STORE: 'redis', REDIS_URL: 'redis://127.0.0.1:9' });
    const error = await openRequestLimiter(config, noSql, silent).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RateLimitStoreUnavailableError);
    expect(error).toBeInstanceOf(OperatorError);
    expect((error as Error).message).toMatch(/^Rate limit store: Redis at REDIS_URL is not reachable: [^\n]+$/);
  });

  it('is off at 0 requests a minute, whatever the store', async () => {
    const config = loadConfig({
      RATE_LIMIT_PER_MINUTE: '0',
      RATE_LIMIT_STORE: 'redis',
      REDIS_URL: 'redis://127.0.0.1:9',
    });
    expect(await openRequestLimiter(config, noSql, silent)).toBeUndefined();
  });

  it.runIf(process.env.TEST_REDIS_URL)('keeps answering from memory while Redis is away', async () => {
    const config = loadConfig({
      RATE_LIMIT_PER_MINUTE: '2',
      RATE_LIMIT_STORE: 'redis',
      REDIS_URL: process.env.TEST_REDIS_URL ?? '',
    });
    const opened = await openRequestLimiter(config, noSql, silent);
    if (!opened) throw new Error('expected a limiter');
    const key = `away-${Date.now()}`;
    await opened.limiter.consume(key);
    await opened.close(); // as good as Redis going away
    // The insurance limiter counts on: two fresh points, then refusal, never an error.
    await opened.limiter.consume(key);
    await opened.limiter.consume(key);
    await expect(opened.limiter.consume(key)).rejects.toMatchObject({ remainingPoints: 0 });
  });

  it.runIf(process.env.TEST_DB === 'postgres')(
    'counts in the request_rate_limits table with the postgres store',
    async () => {
      const service = await startService({ RATE_LIMIT_PER_MINUTE: '5', RATE_LIMIT_STORE: 'postgres' });
      try {
        await service.http.get('/auth/me').expect(401); // probes are not counted: an API request is
        const rows = await service.ctx.db.sql.all(tables.selectFrom('request_rate_limits').selectAll());
        expect(rows).toEqual([expect.objectContaining({ key: expect.stringMatching(/^request:ip:/), points: 1 })]);
        expect(Number(rows[0]?.expire)).toBeGreaterThan(Date.now());
        // Unlogged: counts cost no WAL.
        expect(
          await service.ctx.db.sql.rows(`SELECT relpersistence FROM pg_class WHERE relname = 'request_rate_limits'`),
        ).toEqual([{ relpersistence: 'u' }]);
      } finally {
        await service.close();
      }
    },
  );
});
