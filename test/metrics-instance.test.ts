import { rm } from 'node:fs/promises';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuthResultSchema } from '../contract/auth.js';
import { freshDatabase, serverReachableTempDir, type TestDatabase } from './support/databases.js';
import { samplesOf, valueOf, type Sample } from './support/metrics.js';
import { startReceiver, type Receiver } from './support/receiver.js';
import { killIfRunning, startServiceProcess, type ServiceProcess } from './support/processes.js';

const METRICS_TOKEN = 'a-scrape-token-of-at-least-32-characters';

/** One request on a connection of its own, so that the cluster hands it to the next worker. */
function send(
  base: string,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: unknown,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request(
      new URL(path, base),
      { method, agent: false, headers: { ...headers, ...(payload ? { 'content-type': 'application/json' } : {}) } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

let database: TestDatabase;
let dataDir: string;
let receiver: Receiver;
let service: ServiceProcess | undefined;

const scrape = async (): Promise<Sample[]> => {
  const res = await send(service?.url ?? '', 'GET', '/metrics', { authorization: `Bearer ${METRICS_TOKEN}` });
  expect(res.status, res.text).toBe(200);
  return samplesOf(res.text);
};

beforeAll(async () => {
  database = await freshDatabase();
  receiver = await startReceiver();
  dataDir = await serverReachableTempDir('task-service-metrics-');
  service = await startServiceProcess({
    DATABASE_URL: database.url,
    DATA_DIR: dataDir,
    WEB_CONCURRENCY: '2',
    DATABASE_POOL_SIZE: '4',
    METRICS_TOKEN,
    WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
  });
}, 120_000);
afterAll(async () => {
  killIfRunning(service);
  await service?.exited;
  await receiver.close();
  await database.drop();
  await rm(dataDir, { recursive: true, force: true });
});

describe('/metrics with two HTTP workers', () => {
  it('sums every worker: each scrape, whichever worker takes it, counts every request once', async () => {
    const healthz = { method: 'GET', route: '/healthz', status: '200' };
    for (let i = 0; i < 20; i++) expect((await send(service?.url ?? '', 'GET', '/healthz')).status).toBe(200);
    for (let i = 0; i < 6; i++) {
      const samples = await scrape();
      expect(valueOf(samples, 'http_requests_total', healthz)).toBe(20);
      expect(valueOf(samples, 'http_request_duration_seconds_count', healthz)).toBe(20);
    }
    // Each scrape is counted too, and the count only grows.
    const metrics = { method: 'GET', route: '/metrics', status: '200' };
    const seen: number[] = [];
    for (let i = 0; i < 6; i++) seen.push(valueOf(await scrape(), 'http_requests_total', metrics));
    expect(seen).toEqual([...seen].sort((a, b) => a - b));
    expect(new Set(seen).size).toBe(seen.length);
  });

  it("includes the main process: its webhook deliveries, its event listener and its pool; every process's pool", async () => {
    const base = service?.url ?? '';
    const registered = await send(
      base,
      'POST',
      '/auth/register',
      {},
      { email: 'metrics@example.test', password: 'long enough password', name: 'Metrics' },
    );
    expect(registered.status).toBe(201);
    const auth = { authorization: `Bearer ${AuthResultSchema.parse(JSON.parse(registered.text)).accessToken}` };
    expect(
      (await send(base, 'POST', '/webhooks', auth, { url: receiver.url('/metrics-hook'), events: ['task.created'] }))
        .status,
    ).toBe(201);
    expect((await send(base, 'POST', '/tasks', auth, { title: 'Delivered by the main process' })).status).toBe(201);
    await expect.poll(() => receiver.received('/metrics-hook').length, { timeout: 20_000 }).toBe(1);

    await expect
      .poll(async () => valueOf(await scrape(), 'webhook_delivery_attempts_total', { outcome: 'succeeded' }), {
        timeout: 10_000,
      })
      .toBe(1);
    const samples = await scrape();
    expect(valueOf(samples, 'webhook_delivery_duration_seconds_count', {})).toBe(1);
    expect(valueOf(samples, 'event_signals_total', {})).toBeGreaterThan(0);
    // Three pools (main + two workers), DATABASE_POOL_SIZE each.
    expect(valueOf(samples, 'db_pool_max_connections', {})).toBe(12);
    expect(
      valueOf(samples, 'db_pool_connections', { state: 'idle' }) +
        valueOf(samples, 'db_pool_connections', { state: 'in_use' }),
    ).toBeGreaterThan(0);
  });
});
