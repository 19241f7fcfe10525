import { randomBytes } from 'node:crypto';
import request from 'supertest';
import { describe, expect, it } from 'vitest';
import { buildApp } from '../server/app.js';
import { ConfigError, loadConfig } from '../server/config.js';
import { samplesOf, valueOf } from './support/metrics.js';
import { openSse } from './support/sse.js';
import { listen, serviceForFile } from './support/app.js';
import { createTask } from './support/tasks.js';
import { userForFile } from './support/users.js';

const METRICS_TOKEN = randomBytes(32).toString('base64url');

const service = serviceForFile({ METRICS_TOKEN });
const admin = userForFile(service, { admin: true });
const alice = userForFile(service);

const scrape = async (auth = `Bearer ${METRICS_TOKEN}`) => {
  const res = await service.http.get('/metrics').set('Authorization', auth).expect(200);
  return samplesOf(res.text);
};

describe('GET /metrics', () => {
  it('answers 401 without a token, or with a wrong one, with WWW-Authenticate', async () => {
    const anonymous = await service.http
      .get('/metrics')
      .expect(401)
      .expect('Content-Type', /application\/problem\+json/);
    expect(anonymous.body.code).toBe('unauthenticated');
    expect(anonymous.headers['www-authenticate']).toMatch(/^Bearer resource_metadata="[^"]+"$/);
    await service.http.get('/metrics').set('Authorization', `Bearer ${METRICS_TOKEN}x`).expect(401);
    await service.http.get('/metrics').set('Authorization', METRICS_TOKEN).expect(401);
  });

  it("answers 403 to a user's access token", async () => {
    const res = await service.http.get('/metrics').set('Authorization', alice.auth).expect(403);
    expect(res.body.code).toBe('forbidden');
  });

  it("answers the Prometheus text format to an admin's access token and to METRICS_TOKEN", async () => {
    for (const auth of [admin.auth, `Bearer ${METRICS_TOKEN}`]) {
      const res = await service.http
        .get('/metrics')
        .set('Authorization', auth)
        .expect(200)
        .expect('Content-Type', /^text\/plain; version=0\.0\.4/);
      expect(res.text).toContain('# TYPE http_requests_total counter');
      expect(res.text).toContain('# TYPE http_request_duration_seconds histogram');
      // Default process metrics.
      expect(res.text).toContain('# TYPE process_cpu_user_seconds_total counter');
      expect(res.text).toContain('# TYPE nodejs_eventloop_lag_seconds gauge');
    }
  });

  it('counts and times requests by method, route template and status', async () => {
    const task = await createTask(service, alice, { title: 'Counted' });
    const labels = { method: 'GET', route: '/tasks/:task_id', status: '200' };
    const missing = { method: 'GET', route: '/tasks/:task_id', status: '404' };
    const before = await scrape();

    await service.http.get(`/tasks/${task.id}`).set('Authorization', alice.auth).expect(200);
    await service.http.get(`/tasks/${task.id}`).set('Authorization', alice.auth).expect(200);
    await service.http.get('/tasks/0190f0f0-0000-7000-8000-000000000000').set('Authorization', alice.auth).expect(404);
    const after = await scrape();

    expect(valueOf(after, 'http_requests_total', labels) - valueOf(before, 'http_requests_total', labels)).toBe(2);
    expect(
      valueOf(after, 'http_request_duration_seconds_count', labels) -
        valueOf(before, 'http_request_duration_seconds_count', labels),
    ).toBe(2);
    expect(valueOf(after, 'http_request_duration_seconds_bucket', { ...labels, le: '+Inf' })).toBe(
      valueOf(after, 'http_request_duration_seconds_count', labels),
    );
    expect(valueOf(after, 'http_requests_total', missing) - valueOf(before, 'http_requests_total', missing)).toBe(1);
    // Never the raw URL: ids would make a series per resource.
    expect(after.some((sample) => Object.values(sample.labels).some((value) => value.includes(task.id)))).toBe(false);
  });

  it('labels requests that match no route "unmatched"', async () => {
    const labels = { method: 'GET', route: 'unmatched', status: '404' };
    const before = valueOf(await scrape(), 'http_requests_total', labels);
    await service.http.get('/no/such/path/42').expect(404);
    expect(valueOf(await scrape(), 'http_requests_total', labels) - before).toBe(1);
  });

  it('answers 405 with Allow to other methods', async () => {
    const res = await service.http.post('/metrics').set('Authorization', `Bearer ${METRICS_TOKEN}`).expect(405);
    expect(res.headers.allow).toBe('GET, HEAD');
  });

  it('keeps one registry per app', async () => {
    const labels = { method: 'GET', route: '/healthz', status: '200' };
    await service.http.get('/healthz').expect(200);
    expect(valueOf(await scrape(), 'http_requests_total', labels)).toBeGreaterThan(0);
    const second = request(buildApp(service.ctx));
    const res = await second.get('/metrics').set('Authorization', `Bearer ${METRICS_TOKEN}`).expect(200);
    expect(valueOf(samplesOf(res.text), 'http_requests_total', labels)).toBe(0);
  });
});

describe('event metrics', () => {
  it('counts open event streams, what they were sent, the fan-out and the pool, and declares the webhook delivery series', async () => {
    const server = await listen(service);
    try {
      const before = await scrape();
      const sse = await openSse(server.baseUrl, { Authorization: alice.auth });
      expect(valueOf(await scrape(), 'event_streams_open', {})).toBe(1);
      expect(
        valueOf(await scrape(), 'event_streams_opened_total', {}) - valueOf(before, 'event_streams_opened_total', {}),
      ).toBe(1);
      await createTask(service, alice, { title: 'Streamed' });
      // Without a direct connection (DATABASE_URL alone) streams wake on a poll each second.
      await expect
        .poll(
          async () =>
            valueOf(await scrape(), 'event_stream_events_sent_total', {}) -
            valueOf(before, 'event_stream_events_sent_total', {}),
          { timeout: 5_000 },
        )
        .toBeGreaterThanOrEqual(1);
      const after = await scrape();
      expect(
        valueOf(after, 'event_fanout_events_total', {}) - valueOf(before, 'event_fanout_events_total', {}),
      ).toBeGreaterThanOrEqual(1);
      expect(
        valueOf(after, 'event_fanout_reads_total', {}) - valueOf(before, 'event_fanout_reads_total', {}),
      ).toBeGreaterThanOrEqual(1);
      // The commit's NOTIFY may reach the listener after the stream was served.
      await expect
        .poll(
          async () => valueOf(await scrape(), 'event_signals_total', {}) - valueOf(before, 'event_signals_total', {}),
          { timeout: 5_000 },
        )
        .toBeGreaterThanOrEqual(1);
      for (const state of ['idle', 'in_use'])
        expect(after.some((sample) => sample.name === 'db_pool_connections' && sample.labels.state === state)).toBe(
          true,
        );
      sse.close();
      await expect.poll(async () => valueOf(await scrape(), 'event_streams_open', {})).toBe(0);
    } finally {
      await server.close();
    }
    const text = (await service.http.get('/metrics').set('Authorization', `Bearer ${METRICS_TOKEN}`).expect(200)).text;
    for (const name of [
      'webhook_delivery_attempts_total counter',
      'webhook_delivery_duration_seconds histogram',
      'webhook_delivery_lag_seconds histogram',
    ]) {
      expect(text).toContain(`# TYPE ${name}`);
    }
  });
});

describe('METRICS_TOKEN', () => {
  it('must be at least 32 characters', () => {
    expect(() => loadConfig({ METRICS_TOKEN: 'too-short' })).toThrow(ConfigError);
    expect(() => loadConfig({ METRICS_TOKEN: 'too-short' })).toThrow(/METRICS_TOKEN/);
    expect(loadConfig({ METRICS_TOKEN }).metricsToken).toBe(METRICS_TOKEN);
  });
});
