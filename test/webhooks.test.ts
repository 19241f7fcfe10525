import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { v7 as uuidv7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { pageOf } from '../contract/common.js';
import {
  CreatedWebhookSchema,
  DeliverySchema,
  WebhookSchema,
  type CreatedWebhook,
  type Delivery,
} from '../contract/webhooks.js';
import { createContext } from '../server/bootstrap.js';
import { loadConfig } from '../server/config.js';
import type { AppContext } from '../server/context.js';
import type { Database } from '../server/db/database.js';
import { tables } from '../server/db/query.js';
import { openTestDatabase } from './support/databases.js';
import { startDeliveryWorker } from '../server/webhooks/worker.js';
import { listen, serviceForFile } from './support/app.js';
import { changeWithPrevious, readAllChanges, updatesWithPrevious } from './support/events.js';
import { openSse } from './support/sse.js';
import type { Event } from '../contract/events.js';
import { errorPaths, expectProblem } from './support/problems.js';
import { startReceiver, type Receiver } from './support/receiver.js';
import { createPersonalToken } from './support/personal-tokens.js';
import { createTask } from './support/tasks.js';
import { registerUser, type TestUser, userForFile } from './support/users.js';

const DeliveryPageSchema = pageOf(DeliverySchema);
const FAST_RETRIES = { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', WEBHOOK_RETRY_SCHEDULE: '0.2,0.2,0.2' };

const service = serviceForFile(FAST_RETRIES);
let receiver: Receiver;
let stopWorker: () => Promise<void>;
let pathCount = 0;
const alice = userForFile(service);
const bob = userForFile(service);
const admin = userForFile(service, { admin: true });
beforeAll(async () => {
  receiver = await startReceiver();
  stopWorker = startDeliveryWorker(service.ctx);
});
afterAll(async () => {
  await stopWorker();
  await receiver.close();
});

/** Registers a webhook for `user` at a fresh receiver path whose requests are verified with its secret. */
async function hook(user: TestUser, events: string[] = ['*']): Promise<CreatedWebhook & { path: string }> {
  const path = `/hook-${++pathCount}`;
  const res = await service.http
    .post('/webhooks')
    .set('Authorization', user.auth)
    .send({ url: receiver.url(path), events })
    .expect(201);
  const webhook = CreatedWebhookSchema.parse(res.body);
  receiver.expect(path, webhook.secret);
  return { ...webhook, path };
}

async function deliveries(user: TestUser, webhookId: string): Promise<Delivery[]> {
  const res = await service.http
    .get(`/webhooks/${webhookId}/deliveries`)
    .query({ limit: 100 })
    .set('Authorization', user.auth)
    .expect(200);
  return DeliveryPageSchema.parse(res.body).items;
}

describe('webhook CRUD', () => {
  it('creates a webhook with a whsec_ secret shown once, and reads, lists, changes and deletes it', async () => {
    const res = await service.http
      .post('/webhooks')
      .set('Authorization', alice.auth)
      .send({ url: 'https://example.invalid/hook', events: ['task.created', 'task.created'], description: 'ci' })
      .expect(201);
    const created = CreatedWebhookSchema.parse(res.body);
    expect(created).toMatchObject({
      ownerId: alice.user.id,
      url: 'https://example.invalid/hook',
      events: ['task.created'],
      active: true,
      disabledReason: null,
    });
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(res.headers.location).toBe(`/webhooks/${created.id}`);
    const read = await service.http.get(`/webhooks/${created.id}`).set('Authorization', alice.auth).expect(200);
    expect(read.body).not.toHaveProperty('secret');
    expect(WebhookSchema.strict().parse(read.body).id).toBe(created.id);
    const listed = pageOf(WebhookSchema).parse(
      (await service.http.get('/webhooks').set('Authorization', alice.auth).expect(200)).body,
    );
    expect(listed.items.map((w) => w.id)).toContain(created.id);
    expect(listed.items.every((w) => w.ownerId === alice.user.id)).toBe(true);
    const patched = WebhookSchema.parse(
      (
        await service.http
          .patch(`/webhooks/${created.id}`)
          .set('Authorization', alice.auth)
          .send({ events: ['*'], active: false })
          .expect(200)
      ).body,
    );
    expect(patched).toMatchObject({ events: ['*'], active: false, disabledReason: 'switched off by its owner' });
    await service.http.delete(`/webhooks/${created.id}`).set('Authorization', alice.auth).expect(204);
    expectProblem(await service.http.get(`/webhooks/${created.id}`).set('Authorization', alice.auth), 404, 'not_found');
  });

  it("answers 404 for another user's webhook (admins see it), 400 for bad input, 401 without a token", async () => {
    const mine = await hook(alice);
    for (const req of [
      service.http.get(`/webhooks/${mine.id}`),
      service.http.patch(`/webhooks/${mine.id}`).send({ active: false }),
      service.http.delete(`/webhooks/${mine.id}`),
      service.http.get(`/webhooks/${mine.id}/deliveries`),
    ])
      expectProblem(await req.set('Authorization', bob.auth), 404, 'not_found');
    await service.http.get(`/webhooks/${mine.id}`).set('Authorization', admin.auth).expect(200);
    const bad = [
      [{ url: 'ftp://example.test/', events: ['*'] }, ['body.url']],
      [{ url: 'https://user:pw@example.test/', events: ['*'] }, ['body.url']],
      [{ url: 'not a url', events: ['*'] }, ['body.url']],
      [{ url: 'https://example.test/', events: [] }, ['body.events']],
      [{ url: 'https://example.test/', events: ['task.exploded'] }, ['body.events.0']],
      [{ url: 'https://example.test/', events: ['*'], secret: 'mine' }, ['body']],
    ] as const;
    for (const [body, paths] of bad) {
      expect(
        errorPaths(
          expectProblem(
            await service.http.post('/webhooks').set('Authorization', alice.auth).send(body),
            400,
            'validation_failed',
          ),
        ),
      ).toEqual(paths);
    }
    expectProblem(await service.http.get('/webhooks'), 401, 'unauthenticated');
  });
});

describe('deliveries', () => {
  it('POSTs each event signed per Standard Webhooks, the same event as the changes feed', async () => {
    const webhook = await hook(alice);
    const task = await createTask(service, alice, { title: 'hooked' });
    await expect.poll(() => receiver.received(webhook.path).length).toBe(1);
    const [got] = receiver.received(webhook.path);
    expect(got?.verified).toBe(true);
    expect(got?.event).toMatchObject({ type: 'task.created', data: { task } });
    expect(got?.headers['webhook-id']).toBe(got?.event.id);
    const feed = await readAllChanges(service, alice);
    expect(feed.events.find((e) => e.id === got?.event.id)).toEqual(got?.event);
    await expect
      .poll(async () => (await deliveries(alice, webhook.id)).map((d) => [d.attempt, d.state, d.statusCode]))
      .toEqual([[1, 'succeeded', 204]]);
  });

  it("reaches a project's members; a removed member's webhook delivers nothing more of the project, retries included", async () => {
    const projectRes = await service.http.post('/projects').set('Authorization', alice.auth).send({ name: 'hooked' });
    const projectId = z.object({ id: z.string() }).parse(projectRes.body).id;
    await service.http
      .post(`/projects/${projectId}/members`)
      .set('Authorization', alice.auth)
      .send({ userId: bob.user.id, role: 'viewer' })
      .expect(201);
    const webhook = await hook(bob, ['task.created', 'task.updated', 'project.member_removed']);
    // The first attempt fails, so a retry falls due after the removal.
    receiver.answer(webhook.path, (nth) => (nth === 1 ? 500 : 204));
    const task = await createTask(service, alice, { title: 'in a project', projectId });
    await expect.poll(() => receiver.received(webhook.path).length).toBe(1);
    expect(receiver.received(webhook.path)[0]?.event).toMatchObject({ type: 'task.created', data: { task } });
    await service.http
      .delete(`/projects/${projectId}/members/${bob.user.id}`)
      .set('Authorization', alice.auth)
      .expect(204);
    await service.http
      .patch(`/tasks/${task.id}`)
      .set('Authorization', alice.auth)
      .send({ title: 'unseen' })
      .expect(200);
    // The retry and the removal's delivery run about together: which is newer is not the point.
    const attempts = async () =>
      (await deliveries(bob, webhook.id)).map((d) => `${d.eventType} #${d.attempt} ${d.state}`).sort();
    await expect
      .poll(attempts)
      .toEqual(['project.member_removed #1 succeeded', 'task.created #1 failed', 'task.created #2 failed']);
    const retry = (await deliveries(bob, webhook.id)).find((d) => d.eventType === 'task.created' && d.attempt === 2);
    expect(retry?.error).toMatch(/no longer sees/);
    expect(receiver.received(webhook.path).map((r) => r.event.type)).toEqual([
      'task.created',
      'project.member_removed',
    ]);
  });

  it("project.member_added reaches the added user, and project.member_removed is the removed one's last event of the project, on all three readers", async () => {
    const carol = await registerUser(service, { name: 'Carol' });
    const listening = await listen(service);
    const sse = await openSse(listening.baseUrl, { Authorization: carol.auth });
    try {
      const webhook = await hook(carol);
      const from = (await readAllChanges(service, carol)).cursor;
      const projectRes = await service.http.post('/projects').set('Authorization', alice.auth).send({ name: 'joined' });
      const projectId = z.object({ id: z.string() }).parse(projectRes.body).id;
      const added = expect.objectContaining({
        type: 'project.member_added',
        data: { projectId, member: expect.objectContaining({ userId: carol.user.id, role: 'editor' }) },
      });
      const removed = expect.objectContaining({
        type: 'project.member_removed',
        data: { projectId, userId: carol.user.id },
      });
      await service.http
        .post(`/projects/${projectId}/members`)
        .set('Authorization', alice.auth)
        .send({ userId: carol.user.id, role: 'editor' })
        .expect(201);
      // Assigned to Carol: her removal unassigns her, a task.updated the project's members receive, not her.
      const task = await createTask(service, alice, { title: 'hers', projectId, assigneeId: carol.user.id });
      // The changes feed as a member (it reads the project as of reading: once removed, only the removal).
      const whileMember = await readAllChanges(service, carol, from);
      expect(whileMember.events).toContainEqual(added);
      // Delivered before her removal: a delivery decides as of sending, so one still pending then
      // would fail (she no longer sees the task), as the test above shows.
      await expect
        .poll(() => receiver.received(webhook.path).some((r) => JSON.stringify(r.event.data).includes(task.id)))
        .toBe(true);
      await service.http
        .delete(`/projects/${projectId}/members/${carol.user.id}`)
        .set('Authorization', alice.auth)
        .expect(204);
      await service.http
        .patch(`/tasks/${task.id}`)
        .set('Authorization', alice.auth)
        .send({ title: 'unseen' })
        .expect(200);
      // A project of her own (its creator its first member), then an event of her own after all
      // that, so each reader is known to have read past it.
      const ownRes = await service.http.post('/projects').set('Authorization', carol.auth).send({ name: 'hers' });
      const own = z.object({ id: z.string() }).parse(ownRes.body).id;
      const marker = await createTask(service, carol, { title: 'marker' });
      const ofProject = (events: Event[]) =>
        events
          .filter(
            (event) => JSON.stringify(event.data).includes(projectId) || JSON.stringify(event.data).includes(task.id),
          )
          .map((event) => event.type);
      await sse.until((frames) => frames.some((frame) => frame.data?.includes(marker.id) === true));
      expect(sse.events()).toContainEqual(added);
      // The project's creation reaches her stream too when the stream reads it after she joined
      // (a stream decides each event as of reading): what follows her joining is the point.
      const streamed = ofProject(sse.events());
      expect(streamed.slice(streamed.indexOf('project.member_added'))).toEqual([
        'project.member_added',
        'task.created',
        'project.member_removed',
      ]);
      expect(streamed.slice(0, streamed.indexOf('project.member_added'))).toEqual(
        streamed[0] === 'project.created' ? ['project.created'] : [],
      );
      expect(
        sse
          .events()
          .filter((event) => event.type.startsWith('project.') && JSON.stringify(event.data).includes(projectId))
          .at(-1),
      ).toEqual(removed);

      const afterRemoval = (await readAllChanges(service, carol, whileMember.cursor)).events;
      expect(ofProject(afterRemoval)).toEqual(['project.member_removed']);
      expect(afterRemoval).toContainEqual(removed);

      await expect
        .poll(() => receiver.received(webhook.path).some((r) => JSON.stringify(r.event).includes(marker.id)))
        .toBe(true);
      const delivered = receiver.received(webhook.path).map((r) => r.event);
      expect(delivered).toContainEqual(added);
      expect(delivered).toContainEqual(removed);
      expect(delivered).toContainEqual(
        expect.objectContaining({ type: 'project.created', data: { project: expect.objectContaining({ id: own }) } }),
      );
      // Deliveries run side by side, so their order is not the log's: the set says it.
      expect(ofProject(delivered).sort()).toEqual(['project.member_added', 'project.member_removed', 'task.created']);
    } finally {
      sse.close();
      await listening.close();
    }
  });

  it('retries a failing receiver with the same webhook-id until it succeeds, and logs every attempt newest first', async () => {
    const webhook = await hook(alice, ['tag.created']);
    receiver.answer(webhook.path, (nth) => (nth <= 2 ? 500 : 200));
    await service.http.post('/tags').set('Authorization', alice.auth).send({ name: 'retried' }).expect(201);
    await expect.poll(() => receiver.received(webhook.path).length, { timeout: 10_000 }).toBe(3);
    const got = receiver.received(webhook.path);
    expect(new Set(got.map((r) => r.headers['webhook-id'])).size).toBe(1);
    expect(got.every((r) => r.verified)).toBe(true);
    await expect
      .poll(async () => (await deliveries(alice, webhook.id)).map((d) => [d.attempt, d.state, d.statusCode]))
      .toEqual([
        [3, 'succeeded', 200],
        [2, 'failed', 500],
        [1, 'failed', 500],
      ]);
    const log = await deliveries(alice, webhook.id);
    expect(log[1]?.error).toMatch(/500/);
    // Each retry waited about the scheduled 0.2 s (±20%) after the previous attempt.
    const gap = (got[1]?.at ?? 0) - (got[0]?.at ?? 0);
    expect(gap).toBeGreaterThanOrEqual(150);
  });

  it('sends only the event types asked for, and only what the owner may see', async () => {
    const bobs = await hook(bob);
    const admins = await hook(admin, ['task.created']);
    const privateTask = await createTask(service, alice, { title: 'alice only' });
    const shared = await createTask(service, alice, { title: 'shared', assigneeId: bob.user.id });
    await expect.poll(() => receiver.received(admins.path).length).toBe(2);
    await expect.poll(() => receiver.received(bobs.path).length).toBe(1);
    await createTask(service, bob, { title: 'marker' });
    await expect.poll(() => receiver.received(bobs.path).length).toBe(2);
    const bobSaw = receiver.received(bobs.path).map((r) => ('task' in r.event.data ? r.event.data.task.id : ''));
    expect(bobSaw[0]).toBe(shared.id);
    expect(bobSaw).not.toContain(privateTask.id);
    expect(receiver.received(admins.path).every((r) => r.event.type === 'task.created')).toBe(true);
  });

  it('sends only the events the scopes of the credential that made it, or last pointed it elsewhere, may read', async () => {
    const owner = await registerUser(service);
    const pat = await createPersonalToken(service, owner, ['webhooks:write', 'tags:read']);
    const path = `/hook-${++pathCount}`;
    const created = await service.http
      .post('/webhooks')
      .set('Authorization', pat.auth)
      .send({ url: receiver.url(path), events: ['*'] })
      .expect(201);
    const byToken = { ...CreatedWebhookSchema.parse(created.body), path };
    receiver.expect(path, byToken.secret);
    const byLogin = await hook(owner);
    await createTask(service, owner, { title: 'not for the token' });
    await service.http.post('/tags').set('Authorization', owner.auth).send({ name: 'for the token' }).expect(201);
    await expect.poll(() => receiver.received(byLogin.path).length).toBe(2);
    await expect.poll(() => receiver.received(byToken.path).length).toBe(1);
    expect(receiver.received(byToken.path)[0]?.event.type).toBe('tag.created');
    expect((await deliveries(owner, byToken.id)).map((d) => d.eventType)).toEqual(['tag.created']);

    // A token without tasks:read pointing the login's webhook at another receiver gets no task through it.
    const moved = `/hook-${++pathCount}`;
    receiver.expect(moved, byLogin.secret);
    await service.http
      .patch(`/webhooks/${byLogin.id}`)
      .set('Authorization', pat.auth)
      .send({ url: receiver.url(moved) })
      .expect(200);
    await createTask(service, owner, { title: 'still not for the token' });
    await service.http.post('/tags').set('Authorization', owner.auth).send({ name: 'marker' }).expect(201);
    await expect.poll(() => receiver.received(moved).length).toBe(1);
    expect(receiver.received(moved)[0]?.event.type).toBe('tag.created');
  });

  it('retries by hand (202) and refuses while the webhook is switched off (409)', async () => {
    const webhook = await hook(alice, ['tag.created']);
    await service.http.post('/tags').set('Authorization', alice.auth).send({ name: 'manual' }).expect(201);
    // Once the first attempt is over: while one is in flight a manual retry is 409 (one attempt at a time).
    await expect.poll(async () => (await deliveries(alice, webhook.id)).map((d) => d.state)).toEqual(['succeeded']);
    const [first] = await deliveries(alice, webhook.id);
    const res = await service.http
      .post(`/webhooks/${webhook.id}/deliveries/${first?.id}/retry`)
      .set('Authorization', alice.auth)
      .expect(202);
    expect(DeliverySchema.parse(res.body)).toMatchObject({ attempt: 2, eventId: first?.eventId, state: 'pending' });
    await expect.poll(() => receiver.received(webhook.path).length).toBe(2);
    expectProblem(
      await service.http.post(`/webhooks/${webhook.id}/deliveries/${uuidv7()}/retry`).set('Authorization', alice.auth),
      404,
      'not_found',
    );
    await service.http
      .patch(`/webhooks/${webhook.id}`)
      .set('Authorization', alice.auth)
      .send({ active: false })
      .expect(200);
    expectProblem(
      await service.http.post(`/webhooks/${webhook.id}/deliveries/${first?.id}/retry`).set('Authorization', alice.auth),
      409,
      'conflict',
    );
  });

  it('switches a webhook off after 3 days of failures, with the reason', async () => {
    const webhook = await hook(alice, ['tag.created']);
    receiver.answer(webhook.path, () => 503);
    await service.ctx.db.sql.write(
      tables
        .updateTable('webhooks')
        .set({ failing_since: new Date(Date.now() - 3 * 24 * 3600 * 1000 - 1000) })
        .where('id', '=', webhook.id),
    );
    await service.http.post('/tags').set('Authorization', alice.auth).send({ name: 'doomed' }).expect(201);
    await expect
      .poll(
        async () =>
          WebhookSchema.parse(
            (await service.http.get(`/webhooks/${webhook.id}`).set('Authorization', alice.auth).expect(200)).body,
          ).active,
      )
      .toBe(false);
    const read = WebhookSchema.parse(
      (await service.http.get(`/webhooks/${webhook.id}`).set('Authorization', alice.auth)).body,
    );
    expect(read.disabledReason).toMatch(/failed for 3 days/);
    expect((await deliveries(alice, webhook.id)).map((d) => d.state)).toEqual(['failed']);
    // Switching it on again forgets the failures.
    const on = WebhookSchema.parse(
      (
        await service.http
          .patch(`/webhooks/${webhook.id}`)
          .set('Authorization', alice.auth)
          .send({ active: true })
          .expect(200)
      ).body,
    );
    expect(on).toMatchObject({ active: true, disabledReason: null });
  });

  it('delivers task.updated with exactly the fields changed in previous, subtask counts of a parent included', async () => {
    const user = await registerUser(service);
    const webhook = await hook(user);
    const { events, updates } = await changeWithPrevious(service, user);
    await expect.poll(() => receiver.received(webhook.path).length).toBe(events);
    // Deliveries may arrive in any order: put back in the feed's.
    const order = (await readAllChanges(service, user)).events.map((event) => event.id);
    const delivered = receiver
      .received(webhook.path)
      .map((got) => got.event)
      .sort((a, b) => order.indexOf(a.id) - order.indexOf(b.id));
    expect(delivered.map((event) => event.id)).toEqual(order);
    expect(updatesWithPrevious(delivered)).toEqual(updates);
  });
});

describe('several instances and restarts', () => {
  const instances: { ctx: AppContext; db: Database; dataDir: string }[] = [];
  const instance = async () => {
    const db = openTestDatabase(service.ctx.db.url, 3);
    const dataDir = await mkdtemp(path.join(tmpdir(), 'webhook-instance-'));
    const config = loadConfig({
      DATA_DIR: dataDir,
      LOG_LEVEL: 'silent',
      DATABASE_URL: service.ctx.db.url,
      ...FAST_RETRIES,
    });
    const made = { ctx: await createContext(config, db, pino({ level: 'silent' })), db, dataDir };
    instances.push(made);
    return made.ctx;
  };
  afterAll(async () => {
    for (const made of instances) {
      await made.db.close();
      await rm(made.dataDir, { recursive: true, force: true });
    }
  });

  it('a new instance takes over a pending retry after a restart', async () => {
    await stopWorker();
    const first = await instance();
    const stopFirst = startDeliveryWorker(first);
    const webhook = await hook(alice, ['tag.created']);
    receiver.answer(webhook.path, (nth) => (nth === 1 ? 500 : 200));
    await service.http.post('/tags').set('Authorization', alice.auth).send({ name: 'restart' }).expect(201);
    await expect.poll(() => receiver.received(webhook.path).length).toBe(1);
    await stopFirst(); // the retry is pending in the table, nobody delivers now
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(receiver.received(webhook.path).length).toBe(1);
    const second = await instance();
    const stopSecond = startDeliveryWorker(second);
    try {
      await expect.poll(() => receiver.received(webhook.path).length, { timeout: 10_000 }).toBe(2);
      await expect
        .poll(async () => (await deliveries(alice, webhook.id)).map((d) => [d.attempt, d.state]))
        .toEqual([
          [2, 'succeeded'],
          [1, 'failed'],
        ]);
    } finally {
      await stopSecond();
    }
  });

  it('two instances deliver each attempt once between them', { timeout: 60_000 }, async () => {
    const [one, two] = [await instance(), await instance()];
    const stops = [startDeliveryWorker(one), startDeliveryWorker(two)];
    try {
      const webhook = await hook(alice, ['task.created']);
      const tasks = await Promise.all(
        Array.from({ length: 40 }, (_, i) => createTask(service, alice, { title: `fan ${i}` })),
      );
      // All of alice's webhooks share one receiver host, which takes at most 2 attempts at a time.
      await expect.poll(() => receiver.received(webhook.path).length, { timeout: 50_000 }).toBe(40);
      await new Promise((resolve) => setTimeout(resolve, 500));
      const got = receiver.received(webhook.path);
      expect(got.length).toBe(40); // no duplicates: each attempt was taken by one instance
      expect(new Set(got.map((r) => ('task' in r.event.data ? r.event.data.task.id : '')))).toEqual(
        new Set(tasks.map((t) => t.id)),
      );
      // The last attempts' outcomes commit just after their receiver answered (later through a pooler).
      const unsettled = async () =>
        (await deliveries(alice, webhook.id)).filter((d) => d.state !== 'succeeded' || d.attempt !== 1);
      await expect.poll(unsettled, { timeout: 10_000 }).toEqual([]);
    } finally {
      await Promise.all(stops.map((stop) => stop()));
    }
  });
});

// The SSRF guard (every spelling, names, rebinding, no connection before the check): test/webhook-targets.test.ts.
