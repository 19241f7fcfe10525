// Webhook deliveries under hostile receivers: one timer covers the
// whole exchange, the answer's body included; slow receivers cannot pin sockets or exhaust file
// descriptors; one user's dead receivers never delay another user's deliveries; manual retries
// make one attempt at a time; every failed attempt is logged. All receivers are on loopback
// (127.0.0.0/8), with WEBHOOK_ALLOW_PRIVATE_TARGETS=true.
import { once } from 'node:events';
import { readdirSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pageOf } from '../contract/common.js';
import { CreatedWebhookSchema, DeliverySchema, type Delivery } from '../contract/webhooks.js';
import type { AppContext } from '../server/context.js';
import { tables } from '../server/db/query.js';
import { startDeliveryWorker } from '../server/webhooks/worker.js';
import { serviceForFile, startService, type TestService } from './support/app.js';
import { expectProblem } from './support/problems.js';
import { startReceiver, type Receiver } from './support/receiver.js';
import { countOf, countOwned } from './support/rows.js';
import { createTask } from './support/tasks.js';
import { registerAdmin, registerUser, type TestUser } from './support/users.js';

const TIMEOUT_MS = 1000;
const MAX_IN_FLIGHT = 16;
const DeliveryPageSchema = pageOf(DeliverySchema);

const service = serviceForFile({
  WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
  WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
  WEBHOOK_MAX_IN_FLIGHT: String(MAX_IN_FLIGHT),
  // A failed attempt's automatic retry is far away: what a test sees is what it caused.
  WEBHOOK_RETRY_SCHEDULE: '3600',
  USER_MAX_WEBHOOKS: '400',
});
let worker: AppContext;
let receiver: Receiver;
let stopWorker: () => Promise<void>;
const warnings: Record<string, unknown>[] = [];
const servers: (http.Server | net.Server)[] = [];
let paths = 0;
beforeAll(async () => {
  const logs = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n').filter(Boolean))
        warnings.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  // The service's own context with a logger the test reads.
  worker = { ...service.ctx, logger: pino({ level: 'warn' }, logs) };
  receiver = await startReceiver();
  stopWorker = startDeliveryWorker(worker);
});
afterAll(async () => {
  await stopWorker();
  await receiver.close();
  for (const server of servers) {
    server.close();
    if (server instanceof http.Server) server.closeAllConnections();
  }
});

/** Sockets a server accepted, so the test can close them (a black hole never does). */
async function listenOn<T extends http.Server | net.Server>(
  server: T,
  host: string,
): Promise<{ server: T; port: number; sockets: Set<net.Socket> }> {
  const sockets = new Set<net.Socket>();
  server.on('connection', (socket: net.Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
  });
  server.listen(0, host);
  await once(server, 'listening');
  servers.push(server);
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('expected a TCP address');
  return { server, port: address.port, sockets };
}

/** Answers 200 headers at once, then a byte every 100 ms, for ever. */
async function tricklingReceiver(host: string) {
  const closedByClient: number[] = [];
  const made = await listenOn(
    http.createServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('x');
      const started = Date.now();
      const timer = setInterval(() => res.write('x'), 100);
      res.on('close', () => {
        clearInterval(timer);
        closedByClient.push(Date.now() - started);
      });
    }),
    host,
  );
  return { ...made, closedByClient };
}

/** Accepts connections, reads what comes and never answers. */
const blackHole = (host: string) =>
  listenOn(
    net.createServer((socket) => socket.resume()),
    host,
  );

/** Deliveries with their webhooks, to count those of some owners. */
const deliveries = () =>
  tables.selectFrom('webhook_deliveries').innerJoin('webhooks', 'webhooks.id', 'webhook_deliveries.webhook_id');

async function register(user: TestUser, url: string, events = ['task.created']) {
  const res = await service.http.post('/webhooks').set('Authorization', user.auth).send({ url, events }).expect(201);
  return CreatedWebhookSchema.parse(res.body);
}
async function hook(user: TestUser, events = ['task.created']) {
  const path = `/hook-${++paths}`;
  const webhook = await register(user, receiver.url(path), events);
  receiver.expect(path, webhook.secret);
  return { ...webhook, path };
}
async function log(user: TestUser, webhookId: string): Promise<Delivery[]> {
  const res = await service.http
    .get(`/webhooks/${webhookId}/deliveries`)
    .query({ limit: 100 })
    .set('Authorization', user.auth)
    .expect(200);
  return DeliveryPageSchema.parse(res.body).items;
}
const openDescriptors = () => readdirSync('/proc/self/fd').length;

describe('a slow receiver', () => {
  it('is cut off when its answer is not complete within the timeout, and the attempt fails', async () => {
    const user = await registerUser(service);
    const trickle = await tricklingReceiver('127.0.0.1');
    const webhook = await register(user, `http://127.0.0.1:${trickle.port}/slow`);
    await createTask(service, user, { title: 'slow' });
    // Failed, and its automatic retry is scheduled (an hour away here).
    await expect
      .poll(async () => (await log(user, webhook.id)).map((d) => [d.attempt, d.state]), { timeout: 15_000 })
      .toEqual([
        [2, 'pending'],
        [1, 'failed'],
      ]);
    const attempt = (await log(user, webhook.id)).find((d) => d.attempt === 1);
    expect(attempt?.statusCode).toBe(200);
    expect(attempt?.error).toMatch(/no complete answer within 1 s/);
    expect(attempt?.durationMs).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    // The service closed the socket itself: the receiver saw it go.
    await expect.poll(() => trickle.closedByClient.length).toBe(1);
    expect(trickle.sockets.size).toBe(0);
  });

  it('succeeds when a 2xx answer is long: it reads 64 KiB of it and drops the rest', async () => {
    const user = await registerUser(service);
    let sent = 0;
    const big = await listenOn(
      http.createServer((req, res) => {
        req.resume();
        res.writeHead(200);
        const chunk = Buffer.alloc(64 * 1024, 120);
        // Keeps writing for as long as the client reads: 16 MiB at most.
        const pump = () => {
          while (sent < 16 * 1024 * 1024) {
            sent += chunk.length;
            if (!res.write(chunk)) return void res.once('drain', pump);
          }
          res.end();
        };
        pump();
      }),
      '127.0.0.1',
    );
    const webhook = await register(user, `http://127.0.0.1:${big.port}/big`);
    await createTask(service, user, { title: 'big answer' });
    await expect
      .poll(async () => (await log(user, webhook.id)).map((d) => [d.attempt, d.state, d.statusCode]), {
        timeout: 15_000,
      })
      .toEqual([[1, 'succeeded', 200]]);
    expect(sent).toBeLessThan(16 * 1024 * 1024); // it stopped reading long before the end
  });

  it('many trickling receivers do not exhaust file descriptors, and /healthz keeps answering', async () => {
    const hosts = Array.from({ length: 10 }, (_, i) => `127.0.0.${20 + i}`);
    const receivers = await Promise.all(hosts.map((host) => tricklingReceiver(host)));
    const users = await Promise.all(Array.from({ length: 4 }, () => registerUser(service)));
    for (const [u, user] of users.entries()) {
      for (let i = 0; i < 25; i++) {
        const trickle = receivers[(u * 25 + i) % receivers.length];
        await register(user, `http://${hosts[(u * 25 + i) % hosts.length]}:${trickle?.port}/trickle-${i}`);
      }
    }
    const baseline = openDescriptors();
    let peak = baseline;
    await Promise.all(users.map((user) => createTask(service, user, { title: 'storm' })));
    const deadline = Date.now() + 30_000;
    const failed = () =>
      countOf(
        service.ctx.db.sql,
        deliveries()
          .where(
            'webhooks.owner_id',
            'in',
            users.map((user) => user.user.id),
          )
          .where('webhook_deliveries.state', '=', 'failed')
          .where('webhook_deliveries.error', 'like', 'no complete answer%'),
      );
    let healthChecks = 0;
    while ((await failed()) < 100 && Date.now() < deadline) {
      peak = Math.max(peak, openDescriptors());
      await service.http.get('/healthz').expect(200);
      healthChecks++;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(await failed()).toBe(100); // every delivery of the storm was cut off
    expect(healthChecks).toBeGreaterThan(5);
    // Both ends of each connection are in this process: at most two descriptors per attempt in flight.
    expect(peak - baseline).toBeLessThanOrEqual(2 * MAX_IN_FLIGHT + 20);
    await expect.poll(() => receivers.reduce((open, r) => open + r.sockets.size, 0)).toBe(0);
  }, 60_000);
});

describe('fair delivery', () => {
  it("delivers a working receiver's event within 2 s while another user's 300 webhooks point at black holes", async () => {
    const holes = await Promise.all(Array.from({ length: 10 }, (_, i) => blackHole(`127.0.0.${40 + i}`)));
    const mallory = await registerUser(service);
    for (let batch = 0; batch < 300; batch += 20) {
      await Promise.all(
        Array.from({ length: 20 }, (_, j) => batch + j).map((i) =>
          register(mallory, `http://127.0.0.${40 + (i % 10)}:${holes[i % 10]?.port}/dead-${i}`),
        ),
      );
    }
    await Promise.all(Array.from({ length: 5 }, (_, i) => createTask(service, mallory, { title: `flood ${i}` })));
    // Wait until the black holes hold attempts, so the working receiver's event comes after the flood.
    await expect.poll(() => holes.reduce((open, h) => open + h.sockets.size, 0)).toBeGreaterThan(0);
    const alice = await registerUser(service);
    const working = await hook(alice);
    const started = Date.now();
    await createTask(service, alice, { title: 'on time' });
    await expect.poll(() => receiver.received(working.path).length, { timeout: 2_000, interval: 20 }).toBe(1);
    const elapsed = Date.now() - started;
    console.log(
      `fair delivery: the working receiver had its event ${elapsed} ms after the write, beside ${holes.reduce((open, h) => open + h.sockets.size, 0)} attempts held by black holes`,
    );
    expect(elapsed).toBeLessThan(2_000);
    // The flood never had more than its share: at most 2 per host, at most WEBHOOK_MAX_IN_FLIGHT_PER_USER in all.
    const inFlight = holes.map((h) => h.sockets.size);
    expect(Math.max(...inFlight)).toBeLessThanOrEqual(2);
    expect(inFlight.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(8);
    // Mallory goes, with her webhooks and their queue.
    await service.http.delete(`/users/${mallory.user.id}`).set('Authorization', mallory.auth).expect(204);
    for (const hole of holes) for (const socket of hole.sockets) socket.destroy();
  }, 60_000);

  it('keeps at most 2 attempts in flight per target host', async () => {
    const hole = await blackHole('127.0.0.60');
    const user = await registerUser(service);
    for (let i = 0; i < 6; i++) await register(user, `http://127.0.0.60:${hole.port}/one-host-${i}`);
    let peak = 0;
    const watch = setInterval(() => (peak = Math.max(peak, hole.sockets.size)), 10);
    await createTask(service, user, { title: 'one host' });
    await expect
      .poll(
        () =>
          countOf(
            service.ctx.db.sql,
            deliveries().where('webhooks.owner_id', '=', user.user.id).where('webhook_deliveries.state', '=', 'failed'),
          ),
        { timeout: 15_000 },
      )
      .toBe(6);
    clearInterval(watch);
    expect(peak).toBe(2);
  });
});

describe('manual retries', () => {
  it('of one delivery at once make exactly one attempt: one 202, the others 409 conflict', async () => {
    const user = await registerUser(service);
    const webhook = await hook(user);
    await createTask(service, user, { title: 'retry race' });
    await expect.poll(async () => (await log(user, webhook.id)).map((d) => d.state)).toEqual(['succeeded']);
    const [first] = await log(user, webhook.id);
    const answers = await Promise.all(
      Array.from({ length: 8 }, () =>
        service.http.post(`/webhooks/${webhook.id}/deliveries/${first?.id}/retry`).set('Authorization', user.auth),
      ),
    );
    expect(answers.map((r) => r.status).sort()).toEqual([202, 409, 409, 409, 409, 409, 409, 409]);
    for (const res of answers.filter((r) => r.status === 409)) expectProblem(res, 409, 'conflict');
    await expect.poll(() => receiver.received(webhook.path).length).toBe(2);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(receiver.received(webhook.path).length).toBe(2);
    expect((await log(user, webhook.id)).map((d) => [d.attempt, d.state])).toEqual([
      [2, 'succeeded'],
      [1, 'succeeded'],
    ]);
  });

  it('replaces the pending automatic retry: one attempt, never two', async () => {
    const user = await registerUser(service);
    const webhook = await hook(user);
    receiver.answer(webhook.path, (nth) => (nth === 1 ? 500 : 204));
    await createTask(service, user, { title: 'retry replaces' });
    // Attempt 1 failed; attempt 2 is pending an hour away.
    await expect
      .poll(async () => (await log(user, webhook.id)).map((d) => [d.attempt, d.state]))
      .toEqual([
        [2, 'pending'],
        [1, 'failed'],
      ]);
    const [pending, failed] = await log(user, webhook.id);
    const res = await service.http
      .post(`/webhooks/${webhook.id}/deliveries/${failed?.id}/retry`)
      .set('Authorization', user.auth)
      .expect(202);
    expect(DeliverySchema.parse(res.body)).toMatchObject({ id: pending?.id, attempt: 2 });
    await expect
      .poll(async () => (await log(user, webhook.id)).map((d) => [d.attempt, d.state]))
      .toEqual([
        [2, 'succeeded'],
        [1, 'failed'],
      ]);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(receiver.received(webhook.path).length).toBe(2);
    expect((await log(user, webhook.id)).map((d) => d.attempt)).toEqual([2, 1]);
  });

  it('logs every failed attempt at warn with the webhook, the delivery, the attempt and the reason', async () => {
    const user = await registerUser(service);
    const webhook = await hook(user);
    receiver.answer(webhook.path, () => 503);
    await createTask(service, user, { title: 'logged' });
    await expect.poll(async () => (await log(user, webhook.id)).some((d) => d.state === 'failed')).toBe(true);
    const failed = (await log(user, webhook.id)).find((d) => d.state === 'failed');
    await expect
      .poll(() => warnings.find((line) => line.deliveryId === failed?.id))
      .toMatchObject({
        level: 40,
        webhookId: webhook.id,
        deliveryId: failed?.id,
        attempt: 1,
        reason: 'the receiver answered 503',
      });
  });
});

describe('the webhook quota', () => {
  let quota: TestService;
  beforeAll(async () => {
    // 30 creates queue on the user's row one after another: room for that on a busy machine.
    quota = await startService({ WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', DATABASE_STATEMENT_TIMEOUT_MS: '30000' });
  });
  afterAll(() => quota.close());

  it('lets a user hold USER_MAX_WEBHOOKS (default 20) of many parallel creates; the rest are 409 quota_exceeded; admins are exempt', async () => {
    const user = await registerUser(quota);
    const create = (who: TestUser, i: number) =>
      quota.http
        .post('/webhooks')
        .set('Authorization', who.auth)
        .send({ url: `http://127.0.0.1:9/q-${i}`, events: ['*'] });
    const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => create(user, i)));
    expect(answers.filter((r) => r.status === 201)).toHaveLength(20);
    for (const res of answers.filter((r) => r.status !== 201))
      expect(expectProblem(res, 409, 'quota_exceeded', '/webhooks').detail).toContain('USER_MAX_WEBHOOKS');
    expect(await countOwned(quota.ctx.db.sql, 'webhooks', user.user.id)).toBe(20);
    const admin = await registerAdmin(quota);
    const byAdmin = await Promise.all(Array.from({ length: 22 }, (_, i) => create(admin, i)));
    expect(byAdmin.every((r) => r.status === 201)).toBe(true);
  });
});
