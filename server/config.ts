import { isIP } from 'node:net';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { OperatorError } from './operator-error.js';
import { EmailSchema, PasswordSchema, PersonNameSchema } from '@task-service/client';

const bool = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');
const positiveInt = z.coerce.number().int().positive();

/** argon2id at OWASP's minimum parameters (m=19456 KiB, t=2, p=1): the lowest cost a service may run with. */
const MIN_ARGON2_MEMORY_KIB = 19456;
const MIN_ARGON2_TIME_COST = 2;

// Every setting, parsed once at start-up; a bad value stops the start with a clear message.
const EnvSchema = z
  .object({
    PORT: z.coerce
      .number({ invalid_type_error: 'PORT must be a port number, 0 to 65535' })
      .int()
      .min(0)
      .max(65535)
      .default(3000),
    // This machine only, unless the operator opens it (HOST=0.0.0.0 for every interface).
    HOST: z.string().min(1).default('127.0.0.1'),
    DATA_DIR: z.string().min(1).default('./data'),
    DATABASE_URL: z
      .string()
      .regex(
        /^postgres(ql)?:\/\/\S+$/,
        'DATABASE_URL must be a PostgreSQL connection string, postgresql://user:password@host:5432/database (unset: the embedded server)',
      )
      .optional(),
    DATABASE_DIRECT_URL: z
      .string()
      .regex(
        /^postgres(ql)?:\/\/\S+$/,
        'DATABASE_DIRECT_URL must be a PostgreSQL connection string, postgresql://user:password@host:5432/database',
      )
      .optional(),
    DATABASE_POOL_SIZE: positiveInt.default(10),
    WEB_CONCURRENCY: positiveInt.max(64).optional(),
    VALIDATE_RESPONSES: bool.default('false'),
    DATABASE_STATEMENT_TIMEOUT_MS: positiveInt.default(5000),
    HTTP_IDLE_TIMEOUT_MS: positiveInt.default(10_000),
    HTTP_HEADERS_TIMEOUT_MS: positiveInt.default(10_000),
    HTTP_REQUEST_TIMEOUT_MS: positiveInt.default(120_000),
    HTTP_KEEP_ALIVE_TIMEOUT_MS: positiveInt.default(5_000),
    /** How long an answer may wait for a client that reads none of it (a stalled download) before it is cut. */
    HTTP_RESPONSE_IDLE_TIMEOUT_MS: positiveInt.default(60_000),
    /** Connections one client address may hold at once (counted over the instance's HTTP workers). */
    MAX_CONNECTIONS_PER_ADDRESS: positiveInt.max(1_000_000).default(256),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    TRUST_PROXY: z
      .string()
      .refine(
        isTrustProxy,
        'TRUST_PROXY must be true, false, a hop count, or a comma-separated list of addresses, subnets (10.0.0.0/8) or loopback/linklocal/uniquelocal',
      )
      .default('false'),
    CORS_ORIGINS: z
      .string()
      .default('')
      .transform((value) =>
        value
          .split(',')
          .map((origin) => origin.trim())
          .filter(Boolean),
      )
      .pipe(
        z.array(
          z.union(
            [
              z.literal('*'),
              z
                .string()
                .regex(/^https?:\/\/[^/\s]+\/?$/)
                .transform((url) => new URL(url).origin),
            ],
            {
              errorMap: () => ({
                message:
                  'CORS_ORIGINS must be * or comma-separated origins such as https://app.example.com (scheme and host, no path)',
              }),
            },
          ),
        ),
      ),
    JWT_ISSUER: z.string().min(1).default('task-service'),
    JWT_AUDIENCE: z.string().min(1).default('task-service'),
    JWT_PRIVATE_KEY: z.string().min(1).optional(),
    ACCESS_TOKEN_TTL_SECONDS: positiveInt.max(3600).default(900),
    SESSION_IDLE_DAYS: positiveInt.default(30),
    REGISTRATION_ENABLED: bool.default('true'),
    MCP_ENABLED: bool.default('true'),
    /** The service's address as its clients reach it: the OAuth issuer and the resource its tokens are for. */
    PUBLIC_URL: z
      .string()
      .regex(
        /^https?:\/\/[^/?#\s]+(\/[^?#\s]*)?$/,
        'PUBLIC_URL must be the http(s) address clients reach the service at, e.g. https://tasks.example.com (no query or fragment)',
      )
      // The form URL parsing gives it (lower-case host, default port dropped), as clients compare it.
      .transform((url) => new URL(url).href.replace(/\/+$/, ''))
      .optional(),
    OAUTH_ENABLED: bool.default('true'),
    OAUTH_REGISTRATIONS_PER_ADDRESS_PER_HOUR: z.coerce.number().int().min(0).default(30),
    OAUTH_MAX_CLIENTS: positiveInt.default(10_000),
    ADMIN_EMAIL: EmailSchema.optional(),
    ADMIN_PASSWORD: PasswordSchema.optional(),
    ADMIN_NAME: PersonNameSchema.default('Administrator'),
    RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(0).default(600),
    LOGIN_MAX_FAILURES_PER_ACCOUNT_ADDRESS: positiveInt.default(5),
    LOGIN_MAX_FAILURES_PER_ADDRESS: positiveInt.default(30),
    LOGIN_MAX_FAILURES_PER_ACCOUNT: positiveInt.default(100),
    LOGIN_MAX_FAILURES_PER_DEVICE: positiveInt.default(5),
    LOGIN_THROTTLE_WINDOW_SECONDS: positiveInt.default(900),
    REGISTRATIONS_PER_ADDRESS_PER_HOUR: z.coerce.number().int().min(0).default(20),
    REFRESH_REUSE_GRACE_SECONDS: z.coerce.number().int().min(0).max(300).default(10),
    // OWASP's minimum is the floor (checked below); only the test suite (NODE_ENV=test) may go lower.
    ARGON2_MEMORY_KIB: z.coerce.number().int().min(8).default(MIN_ARGON2_MEMORY_KIB),
    ARGON2_TIME_COST: z.coerce.number().int().min(1).default(MIN_ARGON2_TIME_COST),
    NODE_ENV: z.string().optional(),
    PASSWORD_HASH_CONCURRENCY: positiveInt.max(64).optional(),
    ATTACHMENT_MAX_BYTES: positiveInt.default(25 * 1024 * 1024),
    ATTACHMENTS_MAX_PER_TASK: positiveInt.default(100),
    ATTACHMENT_STORAGE: z.enum(['fs', 's3']).default('fs'),
    S3_BUCKET: z.string().min(1).optional(),
    S3_REGION: z.string().min(1).default('us-east-1'),
    S3_ENDPOINT: z.string().url().optional(),
    S3_FORCE_PATH_STYLE: bool.default('false'),
    S3_ACCESS_KEY_ID: z.string().min(1).optional(),
    S3_SECRET_ACCESS_KEY: z.string().min(1).optional(),
    RATE_LIMIT_STORE: z.enum(['memory', 'postgres', 'redis']).default('memory'),
    REDIS_URL: z
      .string()
      .regex(/^rediss?:\/\/\S+$/, 'REDIS_URL must be a redis:// or rediss:// URL')
      .optional(),
    USER_STORAGE_QUOTA_BYTES: positiveInt.default(1024 ** 3),
    USER_MAX_TASKS: positiveInt.default(100_000),
    USER_MAX_TAGS: positiveInt.default(1_000),
    USER_MAX_WEBHOOKS: positiveInt.default(20),
    USER_MAX_PROJECTS: positiveInt.default(1_000),
    PROJECT_MAX_MEMBERS: positiveInt.default(1_000),
    TASK_MAX_COMMENTS: positiveInt.default(10_000),
    EVENT_RETENTION_DAYS: positiveInt.default(30),
    EVENT_STREAM_HEARTBEAT_SECONDS: positiveInt.max(300).default(15),
    EVENTS_MAX_STREAMS_PER_USER: positiveInt.default(10),
    EVENTS_MAX_STREAMS: positiveInt.default(2_000),
    IDEMPOTENCY_MAX_KEYS_PER_USER: positiveInt.default(10_000),
    /** Seconds after which a key claimed by a request that never answered (its process died) is free again. */
    IDEMPOTENCY_ABANDONED_SECONDS: positiveInt.max(3600).default(60),
    /** Seconds between attempts, each counted from the previous one (±20% jitter); decimals allowed. */
    WEBHOOK_RETRY_SCHEDULE: z
      .string()
      .default('30,120,600,3600,21600,86400')
      .transform((value) => value.split(',').map((part) => Number(part.trim())))
      .pipe(
        z
          .array(
            z
              .number()
              .positive()
              .max(7 * 86400),
          )
          .min(1)
          .max(20),
      ),
    WEBHOOK_ALLOW_PRIVATE_TARGETS: bool.default('false'),
    /** The whole exchange of one attempt (connect, request, answer and its body); 10 s by default (docs/configuration.md). */
    WEBHOOK_TIMEOUT_MS: positiveInt.max(600_000).default(10_000),
    /**
     * How long past its timeout an attempt's lease outlives an instance that died mid-attempt before
     * another instance takes the attempt over (a live instance finishes or fails it well before).
     */
    WEBHOOK_LEASE_GRACE_SECONDS: positiveInt.max(3600).default(60),
    /** Attempts one instance has in flight at once (each holds one outbound socket). */
    WEBHOOK_MAX_IN_FLIGHT: positiveInt.max(10_000).default(32),
    /** Attempts in flight for one user's webhooks across all instances, so one user never takes every slot. */
    WEBHOOK_MAX_IN_FLIGHT_PER_USER: positiveInt.max(10_000).default(8),
    /** Test only (test/write-faults.test.ts): the process group is killed as the Nth answer under an Idempotency-Key is about to be kept. */
    TEST_CRASH_AT_KEPT_ANSWER: positiveInt.optional(),
    /** Test only: the embedded PostgreSQL neither syncs initdb's files nor fsyncs (a killed process loses nothing; a machine crash could). */
    TEST_EMBEDDED_POSTGRES_NO_SYNC: bool.default('false'),
    /** A static bearer token that may scrape /metrics (besides admins' access tokens). */
    METRICS_TOKEN: z
      .string()
      .min(32, 'METRICS_TOKEN must be at least 32 characters')
      .regex(/^[\x21-\x7e]+$/, 'METRICS_TOKEN must be printable ASCII without spaces')
      .optional(),
  })
  .refine(
    (env) =>
      env.NODE_ENV === 'test' ||
      (env.ARGON2_MEMORY_KIB >= MIN_ARGON2_MEMORY_KIB && env.ARGON2_TIME_COST >= MIN_ARGON2_TIME_COST),
    {
      message: `ARGON2_MEMORY_KIB must be at least ${MIN_ARGON2_MEMORY_KIB} and ARGON2_TIME_COST at least ${MIN_ARGON2_TIME_COST} (OWASP's minimum for argon2id; lower costs are for the test suite only)`,
      path: ['ARGON2_MEMORY_KIB'],
    },
  )
  .refine((env) => env.NODE_ENV === 'test' || !env.TEST_EMBEDDED_POSTGRES_NO_SYNC, {
    message: 'TEST_EMBEDDED_POSTGRES_NO_SYNC is for the test suite only (NODE_ENV=test): it gives up durability',
    path: ['TEST_EMBEDDED_POSTGRES_NO_SYNC'],
  })
  .refine((env) => env.HTTP_HEADERS_TIMEOUT_MS <= env.HTTP_REQUEST_TIMEOUT_MS, {
    message: 'HTTP_HEADERS_TIMEOUT_MS must not exceed HTTP_REQUEST_TIMEOUT_MS',
    path: ['HTTP_HEADERS_TIMEOUT_MS'],
  })
  .refine((env) => env.DATABASE_DIRECT_URL === undefined || env.DATABASE_URL !== undefined, {
    message:
      'DATABASE_DIRECT_URL needs DATABASE_URL (it names a direct way to the same database; the embedded server needs neither)',
    path: ['DATABASE_DIRECT_URL'],
  })
  .refine((env) => env.WEBHOOK_MAX_IN_FLIGHT_PER_USER <= env.WEBHOOK_MAX_IN_FLIGHT, {
    message: 'WEBHOOK_MAX_IN_FLIGHT_PER_USER must not exceed WEBHOOK_MAX_IN_FLIGHT',
    path: ['WEBHOOK_MAX_IN_FLIGHT_PER_USER'],
  })
  .refine((env) => (env.ADMIN_EMAIL === undefined) === (env.ADMIN_PASSWORD === undefined), {
    message: 'ADMIN_EMAIL and ADMIN_PASSWORD must be set together',
    path: ['ADMIN_PASSWORD'],
  })
  .refine((env) => env.ATTACHMENT_STORAGE !== 's3' || env.S3_BUCKET !== undefined, {
    message: 'S3_BUCKET is required when ATTACHMENT_STORAGE=s3',
    path: ['S3_BUCKET'],
  })
  .refine((env) => (env.S3_ACCESS_KEY_ID === undefined) === (env.S3_SECRET_ACCESS_KEY === undefined), {
    message: 'S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY must be set together',
    path: ['S3_SECRET_ACCESS_KEY'],
  })
  .refine((env) => env.RATE_LIMIT_STORE !== 'redis' || env.REDIS_URL !== undefined, {
    message: 'REDIS_URL is required when RATE_LIMIT_STORE=redis',
    path: ['REDIS_URL'],
  })
  // This variable used to be the strict per-account limit (default 5) that let anyone lock any
  // account; a value that low now would do the same from every address, so it stops the start.
  .refine((env) => env.LOGIN_MAX_FAILURES_PER_ACCOUNT >= env.LOGIN_MAX_FAILURES_PER_ACCOUNT_ADDRESS, {
    message:
      'LOGIN_MAX_FAILURES_PER_ACCOUNT must be at least LOGIN_MAX_FAILURES_PER_ACCOUNT_ADDRESS: it is now the ceiling for one account across all addresses ' +
      '(default 100); the strict limit per account and address is LOGIN_MAX_FAILURES_PER_ACCOUNT_ADDRESS',
    path: ['LOGIN_MAX_FAILURES_PER_ACCOUNT'],
  });

/** An S3-compatible bucket for attachments; without credentials the AWS SDK's default chain applies. */
export interface S3StorageConfig {
  kind: 's3';
  bucket: string;
  region: string;
  endpoint: string | undefined;
  forcePathStyle: boolean;
  credentials: { accessKeyId: string; secretAccessKey: string } | undefined;
}

/** Where the general request rate limit is counted: per instance, or shared by all of them. */
export type RateLimitStoreConfig = { kind: 'memory' } | { kind: 'postgres' } | { kind: 'redis'; url: string };

export interface Config {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl: string | undefined;
  /** A direct connection to DATABASE_URL's database when that is a pooler: migrations and LISTEN. */
  databaseDirectUrl: string | undefined;
  databasePoolSize: number;
  /** HTTP worker processes (Node's cluster); 1 serves from the main process. */
  webConcurrency: number;
  /** Check every response against the contract (tests do; it costs event-loop time per response). */
  validateResponses: boolean;
  /** Bounds every statement the service runs; past it the request is 503. */
  databaseStatementTimeoutMs: number;
  /** How long a connection may stay silent, how long headers and a whole request may take. */
  httpTimeouts: HttpTimeouts;
  /** Connections one client address (the TCP peer: a proxy in front counts as one) may hold at once. */
  maxConnectionsPerAddress: number;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  trustProxy: boolean | number | string;
  /** Browser origins allowed to call the API (CORS); empty: none, `*`: any. */
  corsOrigins: string[];
  jwt: { issuer: string; audience: string; privateKeyPem: string | undefined; accessTokenTtlSeconds: number };
  sessionIdleMs: number;
  registrationEnabled: boolean;
  /** Serve the Model Context Protocol endpoint at POST /mcp. */
  mcpEnabled: boolean;
  /** Where clients reach the service, without a trailing slash (default http://localhost:PORT). */
  publicUrl: string;
  /** The OAuth 2.1 authorization server for MCP clients and apps (docs/mcp.md). */
  oauth: { enabled: boolean; registrationsPerAddressPerHour: number; maxClients: number };
  admin: { email: string; password: string; name: string } | undefined;
  rateLimitPerMinute: number;
  rateLimitStore: RateLimitStoreConfig;
  /** Failed logins per window: per (account, address), per address, per account, and per known device (device tokens). */
  loginThrottle: {
    maxFailuresPerAccountAddress: number;
    maxFailuresPerAddress: number;
    maxFailuresPerAccount: number;
    maxFailuresPerDevice: number;
    windowSeconds: number;
  };
  /** Registrations per client address per hour; 0: unlimited. */
  registrationsPerAddressPerHour: number;
  /** How long a refresh token just rotated out still refreshes its session (two tabs, a retry); 0: never. */
  refreshReuseGraceSeconds: number;
  /** argon2id cost, and how many hashes one process runs at once. */
  argon2: { memoryCost: number; timeCost: number; concurrency: number };
  attachments: { maxBytes: number; maxPerTask: number; storage: { kind: 'fs' } | S3StorageConfig };
  /** Per-user ceilings (admins exempt), so one account cannot fill the disk or the tables. */
  quotas: { storageBytes: number; tasks: number; tags: number; webhooks: number; projects: number };
  /** Members one project may have (admins exempt). */
  projectMaxMembers: number;
  /** Comments one task may have (everyone, admins included: the task's page of comments must stay readable). */
  taskMaxComments: number;
  metricsToken: string | undefined;
  /** Open live streams are capped per user and per instance (counted over all its worker processes). */
  events: { retentionDays: number; heartbeatSeconds: number; maxStreamsPerUser: number; maxStreams: number };
  /** Answers kept under Idempotency-Key per caller; past it the oldest expire early. */
  idempotencyMaxKeysPerUser: number;
  /** A key claimed this long ago by a request that kept no answer belongs to one that died. */
  idempotencyAbandonedSeconds: number;
  webhooks: WebhookConfig;
  /** Test only: kill the process group (SIGKILL) as the Nth answer under an Idempotency-Key is about to be kept. */
  crashAtKeptAnswer: number | undefined;
  /** Test only: the embedded PostgreSQL without syncs (TEST_EMBEDDED_POSTGRES_NO_SYNC). */
  embeddedPostgresNoSync: boolean;
}

export interface WebhookConfig {
  retryScheduleSeconds: number[];
  allowPrivateTargets: boolean;
  /** One attempt's whole exchange, the answer's body included. */
  timeoutMs: number;
  /** How long a lease outlasts its attempt's timeout, for an instance that died mid-attempt. */
  leaseGraceSeconds: number;
  /** Attempts in flight on this instance; for one user across instances. */
  maxInFlight: number;
  maxInFlightPerUser: number;
}

export interface HttpTimeouts {
  idleMs: number;
  headersMs: number;
  requestMs: number;
  keepAliveMs: number;
  /** An answer that makes no progress because the client reads nothing is cut after this long (at least idleMs). */
  responseIdleMs: number;
}

export class ConfigError extends OperatorError {}

const PROXY_NAMES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/** What Express's `trust proxy` takes: a boolean, a hop count, or addresses, subnets and names. */
function isTrustProxy(value: string): boolean {
  if (/^(true|false|\d+)$/.test(value)) return true;
  return value.split(',').every((item) => {
    const [address = '', prefix, ...rest] = item.trim().split('/');
    if (PROXY_NAMES.has(address) && prefix === undefined) return true;
    const family = isIP(address);
    if (family === 0 || rest.length > 0) return false;
    if (prefix === undefined) return true;
    return (
      (/^\d+$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128)) || (family === 4 && isIP(prefix) === 4)
    );
  });
}

function parseTrustProxy(value: string): boolean | number | string {
  if (value === 'true' || value === 'false') return value === 'true';
  if (/^\d+$/.test(value)) return Number(value);
  return value; // a list of addresses or subnets, as Express takes it
}

function rateLimitStoreOf(e: z.infer<typeof EnvSchema>): RateLimitStoreConfig {
  if (e.RATE_LIMIT_STORE === 'redis' && e.REDIS_URL) return { kind: 'redis', url: e.REDIS_URL };
  return e.RATE_LIMIT_STORE === 'postgres' ? { kind: 'postgres' } : { kind: 'memory' };
}

function attachmentStorageOf(e: z.infer<typeof EnvSchema>): Config['attachments']['storage'] {
  if (e.ATTACHMENT_STORAGE === 'fs' || e.S3_BUCKET === undefined) return { kind: 'fs' };
  return {
    kind: 's3',
    bucket: e.S3_BUCKET,
    region: e.S3_REGION,
    endpoint: e.S3_ENDPOINT,
    forcePathStyle: e.S3_FORCE_PATH_STYLE,
    credentials:
      e.S3_ACCESS_KEY_ID && e.S3_SECRET_ACCESS_KEY
        ? { accessKeyId: e.S3_ACCESS_KEY_ID, secretAccessKey: e.S3_SECRET_ACCESS_KEY }
        : undefined,
  };
}

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  // An empty variable (`DATABASE_URL=` in an env file) means unset.
  const given = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== undefined && value !== ''));
  const parsed = EnvSchema.safeParse(given);
  if (!parsed.success) {
    // One line per bad variable, each naming it.
    const lines = parsed.error.issues.map((i) => {
      const name = String(i.path[0] ?? '(environment)');
      return `Invalid configuration: ${i.message.includes(name) ? i.message : `${name}: ${i.message}`}`;
    });
    throw new ConfigError(lines.join('\n'));
  }
  const e = parsed.data;
  // One process by default: it serves HTTP beside the database's own processes on the same cores,
  // at a third of the memory of a main process with a worker per core (docs/benchmarks.md).
  const webConcurrency = e.WEB_CONCURRENCY ?? 1;
  return {
    port: e.PORT,
    host: e.HOST,
    dataDir: path.resolve(e.DATA_DIR),
    databaseUrl: e.DATABASE_URL,
    databaseDirectUrl: e.DATABASE_DIRECT_URL,
    databasePoolSize: e.DATABASE_POOL_SIZE,
    webConcurrency,
    validateResponses: e.VALIDATE_RESPONSES,
    databaseStatementTimeoutMs: e.DATABASE_STATEMENT_TIMEOUT_MS,
    httpTimeouts: {
      idleMs: e.HTTP_IDLE_TIMEOUT_MS,
      headersMs: e.HTTP_HEADERS_TIMEOUT_MS,
      requestMs: e.HTTP_REQUEST_TIMEOUT_MS,
      keepAliveMs: e.HTTP_KEEP_ALIVE_TIMEOUT_MS,
      responseIdleMs: e.HTTP_RESPONSE_IDLE_TIMEOUT_MS,
    },
    maxConnectionsPerAddress: e.MAX_CONNECTIONS_PER_ADDRESS,
    logLevel: e.LOG_LEVEL,
    trustProxy: parseTrustProxy(e.TRUST_PROXY),
    corsOrigins: e.CORS_ORIGINS,
    jwt: {
      issuer: e.JWT_ISSUER,
      audience: e.JWT_AUDIENCE,
      privateKeyPem: e.JWT_PRIVATE_KEY?.replace(/\\n/g, '\n'),
      accessTokenTtlSeconds: e.ACCESS_TOKEN_TTL_SECONDS,
    },
    sessionIdleMs: e.SESSION_IDLE_DAYS * 24 * 3600 * 1000,
    registrationEnabled: e.REGISTRATION_ENABLED,
    mcpEnabled: e.MCP_ENABLED,
    publicUrl: e.PUBLIC_URL ?? `http://localhost:${e.PORT}`,
    oauth: {
      enabled: e.OAUTH_ENABLED,
      registrationsPerAddressPerHour: e.OAUTH_REGISTRATIONS_PER_ADDRESS_PER_HOUR,
      maxClients: e.OAUTH_MAX_CLIENTS,
    },
    admin:
      e.ADMIN_EMAIL && e.ADMIN_PASSWORD
        ? { email: e.ADMIN_EMAIL, password: e.ADMIN_PASSWORD, name: e.ADMIN_NAME }
        : undefined,
    rateLimitPerMinute: e.RATE_LIMIT_PER_MINUTE,
    rateLimitStore: rateLimitStoreOf(e),
    loginThrottle: {
      maxFailuresPerAccountAddress: e.LOGIN_MAX_FAILURES_PER_ACCOUNT_ADDRESS,
      maxFailuresPerAddress: e.LOGIN_MAX_FAILURES_PER_ADDRESS,
      maxFailuresPerAccount: e.LOGIN_MAX_FAILURES_PER_ACCOUNT,
      maxFailuresPerDevice: e.LOGIN_MAX_FAILURES_PER_DEVICE,
      windowSeconds: e.LOGIN_THROTTLE_WINDOW_SECONDS,
    },
    registrationsPerAddressPerHour: e.REGISTRATIONS_PER_ADDRESS_PER_HOUR,
    refreshReuseGraceSeconds: e.REFRESH_REUSE_GRACE_SECONDS,
    argon2: {
      memoryCost: e.ARGON2_MEMORY_KIB,
      timeCost: e.ARGON2_TIME_COST,
      // The cores shared out among the HTTP workers, so that all of them together hash on every core.
      concurrency: e.PASSWORD_HASH_CONCURRENCY ?? Math.max(1, Math.floor(availableParallelism() / webConcurrency)),
    },
    attachments: {
      maxBytes: e.ATTACHMENT_MAX_BYTES,
      maxPerTask: e.ATTACHMENTS_MAX_PER_TASK,
      storage: attachmentStorageOf(e),
    },
    quotas: {
      storageBytes: e.USER_STORAGE_QUOTA_BYTES,
      tasks: e.USER_MAX_TASKS,
      tags: e.USER_MAX_TAGS,
      webhooks: e.USER_MAX_WEBHOOKS,
      projects: e.USER_MAX_PROJECTS,
    },
    projectMaxMembers: e.PROJECT_MAX_MEMBERS,
    taskMaxComments: e.TASK_MAX_COMMENTS,
    metricsToken: e.METRICS_TOKEN,
    events: {
      retentionDays: e.EVENT_RETENTION_DAYS,
      heartbeatSeconds: e.EVENT_STREAM_HEARTBEAT_SECONDS,
      maxStreamsPerUser: e.EVENTS_MAX_STREAMS_PER_USER,
      maxStreams: e.EVENTS_MAX_STREAMS,
    },
    idempotencyMaxKeysPerUser: e.IDEMPOTENCY_MAX_KEYS_PER_USER,
    idempotencyAbandonedSeconds: e.IDEMPOTENCY_ABANDONED_SECONDS,
    webhooks: {
      retryScheduleSeconds: e.WEBHOOK_RETRY_SCHEDULE,
      allowPrivateTargets: e.WEBHOOK_ALLOW_PRIVATE_TARGETS,
      timeoutMs: e.WEBHOOK_TIMEOUT_MS,
      leaseGraceSeconds: e.WEBHOOK_LEASE_GRACE_SECONDS,
      maxInFlight: e.WEBHOOK_MAX_IN_FLIGHT,
      maxInFlightPerUser: e.WEBHOOK_MAX_IN_FLIGHT_PER_USER,
    },
    crashAtKeptAnswer: e.TEST_CRASH_AT_KEPT_ANSWER,
    embeddedPostgresNoSync: e.TEST_EMBEDDED_POSTGRES_NO_SYNC,
  };
}
