import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino, type Logger } from 'pino';
import request from 'supertest';
import type TestAgent from 'supertest/lib/agent.js';
import { afterAll, beforeAll } from 'vitest';
import { buildApp } from '../../server/app.js';
import { createContext } from '../../server/bootstrap.js';
import { loadConfig, type Config } from '../../server/config.js';
import type { AppContext } from '../../server/context.js';
import { createHttpServer } from '../../server/serve.js';
import { freshDatabase } from './databases.js';
import { listenOnLoopback } from './loopback.js';

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

export interface ListeningService {
  /** `http://127.0.0.1:<port>` of the app listening on an ephemeral port. */
  baseUrl: string;
  close(): Promise<void>;
}

/** The service's app on a real socket (an ephemeral port unless given), for clients that speak HTTP themselves. */
export async function listen(service: TestService, at = 0): Promise<ListeningService> {
  const server = createHttpServer(service.ctx);
  const port = await listenOnLoopback(server, at);
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}

export interface FileService extends TestService {
  /** `http://127.0.0.1:<port>`, with `listen: true`. */
  readonly baseUrl: string;
}

/**
 * One service for the whole test file (or the describe block it is called in): started before its
 * first test, closed after its last. `const service = serviceForFile(env);`, then `service.http`,
 * `service.ctx` in tests as with startService. `listen`: on a real socket too (`service.baseUrl`),
 * for clients that speak HTTP themselves; `logger` (made before the start) replaces the silent one.
 */
export function serviceForFile(
  env: Record<string, string> = {},
  options: { listen?: boolean; logger?: () => Logger } = {},
): FileService {
  let service: TestService | undefined;
  let listening: ListeningService | undefined;
  beforeAll(async () => {
    service = await startService(env, options.logger?.());
    if (options.listen) listening = await listen(service);
  });
  afterAll(async () => {
    await listening?.close();
    await service?.close();
  });
  const started = (): TestService => {
    if (service === undefined) throw new Error('The service starts in beforeAll');
    return service;
  };
  return {
    get ctx() {
      return started().ctx;
    },
    get http() {
      return started().http;
    },
    get databaseUrl() {
      return started().databaseUrl;
    },
    get baseUrl() {
      if (listening === undefined)
        throw new Error('Only a serviceForFile(env, { listen: true }) listens, from beforeAll');
      return listening.baseUrl;
    },
    // afterAll closes it.
    close: () => Promise.resolve(),
  };
}
