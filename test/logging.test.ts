import { spawn } from 'node:child_process';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { Writable } from 'node:stream';
import { stripVTControlCharacters } from 'node:util';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { loadConfig } from '../server/config.js';
import { registrationNotice } from '../server/processes/primary.js';
import { serviceForFile } from './support/app.js';
import { freshDatabase, serverReachableTempDir, type TestDatabase } from './support/databases.js';
import { expectProblem } from './support/problems.js';
import { builtEntry, killIfRunning, startServiceProcess } from './support/processes.js';
import { userForFile } from './support/users.js';

const ROOT = path.resolve(import.meta.dirname, '..');

const METRICS_TOKEN = 'a-scrape-token-of-at-least-32-characters';

const LineSchema = z
  .object({
    level: z.number(),
    msg: z.string(),
    req: z.object({ id: z.string(), url: z.string() }).optional(),
    err: z.object({ stack: z.string() }).passthrough().optional(),
  })
  .passthrough();
type Line = z.infer<typeof LineSchema>;

const DEBUG = 20;
const INFO = 30;
const ERROR = 50;

let lines: Line[] = [];
const sink = new Writable({
  write(chunk: Buffer, _encoding, done) {
    for (const text of chunk.toString().split('\n').filter(Boolean)) lines.push(LineSchema.parse(JSON.parse(text)));
    done();
  },
});
const service = serviceForFile({ METRICS_TOKEN }, { logger: () => pino({ level: 'debug' }, sink) });
const alice = userForFile(service);

/** The request log lines of one path, once pino has written them. */
async function linesOf(url: string): Promise<Line[]> {
  await new Promise((resolve) => setImmediate(resolve));
  return lines.filter((line) => line.req?.url === url);
}

describe('the request log', () => {
  it('logs the probes and /metrics at debug, other requests at info', async () => {
    lines = [];
    await service.http.get('/healthz').expect(200);
    await service.http.get('/readyz').expect(200);
    await service.http.get('/metrics').set('Authorization', `Bearer ${METRICS_TOKEN}`).expect(200);
    await service.http.get('/tasks').set('Authorization', alice.auth).expect(200);
    for (const url of ['/healthz', '/readyz', '/metrics']) {
      expect(
        (await linesOf(url)).map((line) => line.level),
        url,
      ).toEqual([DEBUG]);
    }
    expect((await linesOf('/tasks')).map((line) => line.level)).toEqual([INFO]);
  });

  it('logs a request whose client went away as aborted', async () => {
    lines = [];
    // The live stream answers until the client leaves: here after 300 ms.
    await service.http
      .get('/events')
      .set('Authorization', alice.auth)
      .timeout(300)
      .catch(() => undefined);
    await vi.waitFor(
      async () => expect((await linesOf('/events')).map((line) => line.msg)).toEqual(['request aborted']),
      { timeout: 5000 },
    );
  });

  it('logs a 500 once, with its stack and the request id', async () => {
    // A table gone from under the service: an error nobody anticipated.
    await service.ctx.db.sql.exec('ALTER TABLE tags RENAME TO tags_away');
    try {
      lines = [];
      const res = await service.http
        .get('/tags')
        .set('Authorization', alice.auth)
        .set('X-Request-Id', 'trace-500-once');
      expectProblem(res, 500, 'internal', '/tags');
      await new Promise((resolve) => setImmediate(resolve));
      const errors = lines.filter((line) => line.level >= ERROR);
      expect(errors).toHaveLength(1);
      expect(errors[0]?.req?.id).toBe('trace-500-once');
      expect(errors[0]?.err?.stack).toMatch(/\n\s+at /);
      expect(lines.filter((line) => line.req?.id === 'trace-500-once' || line.reqId === 'trace-500-once')).toHaveLength(
        1,
      );
    } finally {
      await service.ctx.db.sql.exec('ALTER TABLE tags_away RENAME TO tags');
    }
  });
});

describe('the service log on a terminal and off it', () => {
  let database: TestDatabase;
  let dataDir: string;
  beforeAll(async () => {
    database = await freshDatabase();
    dataDir = await serverReachableTempDir('task-service-log-');
  });
  afterAll(async () => {
    await database.drop();
    await rm(dataDir, { recursive: true, force: true });
  });

  /** The service under `script`, which gives it a pseudo-terminal, until it says where it listens. */
  async function onTerminal(): Promise<string> {
    const env = {
      ...process.env,
      DATABASE_URL: database.url,
      DATA_DIR: path.join(dataDir, 'tty'),
      PORT: '0',
      HOST: '127.0.0.1',
      WEB_CONCURRENCY: '1',
      LOG_LEVEL: 'info',
    };
    const child = spawn('script', ['-qfec', `${process.execPath} ${builtEntry('server/main')}`, '/dev/null'], {
      cwd: ROOT,
      env,
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let output = '';
    try {
      await new Promise<void>((resolve, reject) => {
        child.stdout.on('data', (chunk: Buffer) => {
          output += chunk.toString();
          if (/listening on http:\/\/127\.0\.0\.1:\d+/.test(stripVTControlCharacters(output))) resolve();
        });
        child.once('exit', () => reject(new Error(`exited: ${output}`)));
      });
    } finally {
      if (child.pid) process.kill(-child.pid, 'SIGTERM');
    }
    return stripVTControlCharacters(output);
  }

  it('is pretty on a terminal', async () => {
    const output = await onTerminal();
    const line = output.split(/\r?\n/).find((text) => text.includes('listening on')) ?? '';
    expect(line).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: task service listening on http:\/\/127\.0\.0\.1:\d+/);
    expect(() => JSON.parse(line)).toThrow();
  }, 60_000);

  it('is one JSON object per line otherwise', async () => {
    const service = await startServiceProcess({
      DATABASE_URL: database.url,
      DATA_DIR: path.join(dataDir, 'json'),
    });
    try {
      const lines = service.stdout().trim().split('\n');
      expect(lines.length).toBeGreaterThan(0);
      for (const line of lines) expect(LineSchema.parse(JSON.parse(line)).level).toBeGreaterThanOrEqual(INFO);
    } finally {
      killIfRunning(service);
    }
  }, 60_000);
});

describe('where the service listens, and who may register', () => {
  let database: TestDatabase;
  let dataDir: string;
  beforeAll(async () => {
    database = await freshDatabase();
    dataDir = await serverReachableTempDir('task-service-registration-');
  });
  afterAll(async () => {
    await database.drop();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('listens on 127.0.0.1 unless HOST says otherwise', () => {
    expect(loadConfig({}).host).toBe('127.0.0.1');
    expect(loadConfig({ HOST: '0.0.0.0' }).host).toBe('0.0.0.0');
  });

  /** The start-up lines that speak of registration, from a service process started with `env`. */
  async function registrationLines(env: Record<string, string>): Promise<Line[]> {
    const service = await startServiceProcess({
      DATABASE_URL: database.url,
      DATA_DIR: dataDir,
      ...env,
    });
    try {
      return service
        .stdout()
        .trim()
        .split('\n')
        .map((line) => LineSchema.parse(JSON.parse(line)))
        .filter((line) => /registration/i.test(line.msg));
    } finally {
      killIfRunning(service);
    }
  }

  it('says in one line at start-up that registration is open, and to whom', async () => {
    const [line, ...more] = await registrationLines({});
    expect(more).toEqual([]);
    expect(line?.msg).toMatch(/registration is open: anyone who can reach http:\/\/127\.0\.0\.1:\d+ /);
    expect(line?.msg).toContain('REGISTRATION_ENABLED=false');
    expect(await registrationLines({ REGISTRATION_ENABLED: 'false' })).toEqual([]);
  }, 60_000);

  it('warns when every interface listens: anyone on the network may register', () => {
    const notice = registrationNotice(loadConfig({ HOST: '0.0.0.0' }), 3000);
    expect(notice).toMatchObject({ level: 'warn' });
    expect(notice?.message).toMatch(/^registration is open to anyone who can reach port 3000 of this machine/);
    expect(notice?.message).toContain('HOST=127.0.0.1');
    for (const host of ['127.0.0.1', '::1', 'localhost'])
      expect(registrationNotice(loadConfig({ HOST: host }), 3000)?.level).toBe('info');
    expect(registrationNotice(loadConfig({ REGISTRATION_ENABLED: 'false' }), 3000)).toBeUndefined();
  });
});
