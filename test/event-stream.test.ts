import { v7 as uuidv7 } from 'uuid';
import { sql } from 'kysely';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import request from 'supertest';
import { describe, expect, it } from 'vitest';
import { buildApp } from '../server/app.js';
import { createContext } from '../server/bootstrap.js';
import { loadConfig } from '../server/config.js';
import { rawQuery } from '../server/db/query.js';
import { eventMetrics } from '../server/events/metrics.js';
import { serviceForFile } from './support/app.js';
import { openTestDatabase } from './support/databases.js';
import { changeWithPrevious, readAllChanges, updatesWithPrevious } from './support/events.js';
import { expectProblem } from './support/problems.js';
import { eventCount, streamsTo } from './support/sse.js';
import { createTask } from './support/tasks.js';
import { registerUser, userForFile } from './support/users.js';

describe('GET /events (Server-Sent Events)', () => {
  const service = serviceForFile({ EVENT_STREAM_HEARTBEAT_SECONDS: '1' }, { listen: true });
  const alice = userForFile(service);
  const bob = userForFile(service);
  const admin = userForFile(service, { admin: true });
  const { connect, closeAll } = streamsTo(service);

  it('answers with the headers at once, then each event as id, event and data', async () => {
    const sse = await connect(alice);
    expect(sse.status).toBe(200);
    expect(sse.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(sse.headers['cache-control']).toBe('no-store');
    const task = await createTask(service, alice, { title: 'streamed' });
    await sse.until((frames) => eventCount(frames) === 1);
    const frame = sse.frames.find((f) => f.data !== undefined);
    const [event] = sse.events();
    expect(event).toMatchObject({ type: 'task.created', data: { task } });
    expect(frame).toMatchObject({ id: event?.id, event: 'task.created' });
    // The same event the changes feed holds.
    const feed = await readAllChanges(service, alice);
    expect(feed.events.find((e) => e.id === event?.id)).toEqual(event);
    sse.close();
  });

  it('sends task.updated with exactly the fields changed in previous, subtask counts of a parent included', async () => {
    const user = await registerUser(service);
    const sse = await connect(user);
    const { events, updates } = await changeWithPrevious(service, user);
    await sse.until((frames) => eventCount(frames) === events);
    expect(updatesWithPrevious(sse.events())).toEqual(updates);
    sse.close();
  });

  it('sends only what the caller may see; admins see everything', async () => {
    const [bobs, admins] = await Promise.all([connect(bob), connect(admin)]);
    await createTask(service, alice, { title: 'private' });
    const shared = await createTask(service, alice, { title: 'shared', assigneeId: bob.user.id });
    await service.http.post('/tags').set('Authorization', alice.auth).send({ name: 'mine' }).expect(201);
    await admins.until((frames) => eventCount(frames) === 3);
    await bobs.until((frames) => eventCount(frames) === 1);
    // A last change bob sees, so that anything sent before it has arrived too.
    await service.http
      .patch(`/tasks/${shared.id}`)
      .set('Authorization', alice.auth)
      .send({ title: 'shared 2' })
      .expect(200);
    await bobs.until((frames) => eventCount(frames) === 2);
    expect(bobs.events().map((e) => e.type)).toEqual(['task.created', 'task.updated']);
    expect(bobs.events().every((e) => 'task' in e.data && e.data.task.id === shared.id)).toBe(true);
  });

  it('resumes after Last-Event-ID with nothing missed and nothing repeated', async () => {
    const first = await connect(alice);
    const before = await createTask(service, alice, { title: 'before the drop' });
    await first.until((frames) => eventCount(frames) === 1);
    const lastId = first.events()[0]?.id ?? '';
    first.close();
    const missed = [];
    for (let i = 0; i < 5; i++) missed.push(await createTask(service, alice, { title: `while away ${i}` }));
    const resumed = await connect(alice, { 'Last-Event-ID': lastId });
    await resumed.until((frames) => eventCount(frames) === 5);
    const after = await createTask(service, alice, { title: 'after the return' });
    await resumed.until((frames) => eventCount(frames) === 6);
    const ids = resumed.events().map((e) => ('task' in e.data ? e.data.task.id : ''));
    expect(ids).toEqual([...missed, after].map((t) => t.id));
    expect(ids).not.toContain(before.id);
  });

  it('loses nothing when resuming while many changes commit', async () => {
    const first = await connect(bob);
    const own = await createTask(service, bob, { title: 'mark' });
    await first.until((frames) => eventCount(frames) === 1);
    const lastId = first.events()[0]?.id ?? '';
    first.close();
    const writes = Promise.all(Array.from({ length: 30 }, (_, i) => createTask(service, bob, { title: `burst ${i}` })));
    const resumed = await connect(bob, { 'Last-Event-ID': lastId });
    const created = await writes;
    await resumed.until((frames) => eventCount(frames) === 30);
    await createTask(service, bob, { title: 'end marker' });
    await resumed.until((frames) => eventCount(frames) === 31);
    const ids = resumed.events().map((e) => ('task' in e.data ? e.data.task.id : ''));
    expect(new Set(ids.slice(0, 30))).toEqual(new Set(created.map((t) => t.id)));
    expect(ids).not.toContain(own.id);
  });

  it('answers 400 to a malformed or unknown Last-Event-ID, 410 to one minted before the retention, 401 without a token', async () => {
    const malformed = await service.http.get('/events').set('Authorization', alice.auth).set('Last-Event-ID', 'nope');
    expectProblem(malformed, 400, 'validation_failed');
    const unknown = await service.http.get('/events').set('Authorization', alice.auth).set('Last-Event-ID', uuidv7());
    expectProblem(unknown, 400, 'validation_failed');
    // Judged by the time in the id alone: the same answer whoever's event it was.
    const gone = await service.http
      .get('/events')
      .set('Authorization', alice.auth)
      .set('Last-Event-ID', '01900000-0000-7000-8000-000000000000');
    expectProblem(gone, 410, 'cursor_expired');
    expectProblem(await service.http.get('/events'), 401, 'unauthenticated');
  });

  it('sends a heartbeat comment, and ends the stream when its session is logged out', async () => {
    const carol = await registerUser(service);
    const sse = await connect(carol);
    await sse.until((frames) => frames.some((f) => f.comment === 'heartbeat'), 3_000);
    await service.http.post('/auth/logout').set('Authorization', carol.auth).expect(204);
    await sse.ended;
  });

  it('cleans up on disconnect: the open-stream gauge goes back, and the LISTEN connection closes with the last stream', async () => {
    closeAll();
    const gauge = async () => (await eventMetrics(service.ctx).openStreams.get()).values[0]?.value ?? 0;
    const listeners = async () =>
      Number(
        (
          await service.ctx.db.sql.first(
            rawQuery(sql<{ n: string }>`
            SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'task-service event listener'`),
          )
        )?.n,
      );
    await expect.poll(gauge, { timeout: 5_000 }).toBe(0);
    await expect.poll(listeners, { timeout: 5_000 }).toBe(0);
    const streams = await Promise.all([1, 2, 3].map(() => connect(alice)));
    await expect.poll(gauge).toBe(3);
    await expect.poll(listeners, { timeout: 5_000 }).toBe(service.ctx.db.directUrl ? 1 : 0); // one per instance, not one per stream (none when polling)
    for (const sse of streams) sse.close();
    await expect.poll(gauge, { timeout: 5_000 }).toBe(0);
    await expect.poll(listeners, { timeout: 5_000 }).toBe(0);
  });

  it('delivers a change made on another instance of the service', async () => {
    const second = openTestDatabase(service.ctx.db.url, 2);
    const dataDir = await mkdtemp(path.join(tmpdir(), 'instance-'));
    try {
      const config = loadConfig({
        DATA_DIR: dataDir,
        LOG_LEVEL: 'silent',
        RATE_LIMIT_PER_MINUTE: '0',
        DATABASE_URL: service.ctx.db.url,
      });
      const other = request(buildApp(await createContext(config, second, pino({ level: 'silent' }))));
      const sse = await connect(alice);
      // Tokens are checked against the session in the database; the key differs per data directory, so log in there.
      const login = await other.post('/auth/login').send({ email: alice.email, password: alice.password }).expect(200);
      const res = await other
        .post('/tasks')
        .set('Authorization', `Bearer ${String(login.body.accessToken)}`)
        .send({ title: 'from instance two' })
        .expect(201);
      await sse.until((frames) => eventCount(frames) === 1);
      expect(sse.events()[0]).toMatchObject({ type: 'task.created', data: { task: { id: res.body.id } } });
    } finally {
      await second.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
