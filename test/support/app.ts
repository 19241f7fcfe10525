import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino, type Logger } from 'pino';
import request from 'supertest';
import type TestAgent from 'supertest/lib/agent.js';
import { buildApp } from '../../server/app.js';
import { createContext } from '../../server/bootstrap.js';
import { loadConfig, type Config } from '../../server/config.js';
import type { AppContext } from '../../server/context.js';
import { freshDatabase } from './databases.js';

export interface TestService {
  ctx: AppContext;
  http: TestAgent;
  /** The PostgreSQL URL of this file's database, when running against PostgreSQL. */
  databaseUrl: string | undefined;
  close(): Promise<void>;
}

/**
 * The service as a test file sees it: a fresh database, a data directory of its own, the real app.
 * `env` overrides configuration the way the environment would; `logger` replaces the silent one.
 */
export async function startService(env: Record<string, string> = {}, logger?: Logger): Promise<TestService> {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'task-service-test-'));
  const config: Config = loadConfig({
    DATA_DIR: dataDir,
    LOG_LEVEL: 'silent',
    RATE_LIMIT_PER_MINUTE: '0',
    REGISTRATIONS_PER_ADDRESS_PER_HOUR: '0',
    VALIDATE_RESPONSES: 'true',
    // The run's test-only hashing cost (vitest.config.ts), as the processes a test spawns inherit it.
    NODE_ENV: 'test',
    ...(process.env.ARGON2_MEMORY_KIB && { ARGON2_MEMORY_KIB: process.env.ARGON2_MEMORY_KIB }),
    ...(process.env.ARGON2_TIME_COST && { ARGON2_TIME_COST: process.env.ARGON2_TIME_COST }),
    ...env,
  });
  const database = await freshDatabase();
  const ctx = await createContext(config, database.db, logger ?? pino({ level: config.logLevel }));
  const app = buildApp(ctx);
  return {
    ctx,
    http: request(app),
    databaseUrl: database.url,
    close: async () => {
      await database.drop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
