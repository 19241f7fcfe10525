// The live stream's limits: caps per user and per instance, a stream ends with its token, role and
// actor decided per event, and a Last-Event-ID that tells nothing about others' events.
import { v7 as uuidv7 } from 'uuid';
import { afterAll, describe, expect, it } from 'vitest';
import { serviceForFile } from './support/app.js';
import { expectProblem } from './support/problems.js';
import { killIfRunning, startServiceProcess, type ServiceProcess } from './support/processes.js';
import { eventCount, openSse, type SseConnection, streamsTo } from './support/sse.js';
import { createTask } from './support/tasks.js';
import { mintAccessToken } from './support/tokens.js';
import { registerUser, userForFile } from './support/users.js';

const withTimeout = <T>(promise: Promise<T>, ms: number, what: string): Promise<T> =>
  Promise.race([
    promise,
    new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`${what} within ${ms} ms`)), ms).unref()),
  ]);

describe('live stream limits', () => {
  const service = serviceForFile({ EVENTS_MAX_STREAMS_PER_USER: '2', EVENTS_MAX_STREAMS: '4' }, { listen: true });
  const alice = userForFile(service);
  const bob = userForFile(service);
  const carol = userForFile(service);
  const { connect, closeAll } = streamsTo(service);

  it('answers 429 rate_limited with Retry-After past EVENTS_MAX_STREAMS_PER_USER, and frees the slot when a stream closes', async () => {
    const [first, second] = [await connect(alice), await connect(alice)];
    expect([first.status, second.status]).toEqual([200, 200]);
    const third = await connect(alice);
    expect(third.status).toBe(429);
    expect(Number(third.headers['retry-after'])).toBeGreaterThan(0);
    expect(JSON.parse(third.body())).toMatchObject({ code: 'rate_limited', status: 429 });
    // Another user is not affected.
    expect((await connect(bob)).status).toBe(200);
    first.close();
    await expect
      .poll(async () => {
        const again = await connect(alice);
        if (again.status !== 200) again.close();
        return again.status;
      })
      .toBe(200);
  });

  it('answers 503 unavailable with Retry-After past EVENTS_MAX_STREAMS on the instance', async () => {
    // alice holds 2 and bob 1: one slot is left on the instance.
    expect((await connect(bob)).status).toBe(200);
    const refused = await connect(carol);
    expect(refused.status).toBe(503);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    expect(JSON.parse(refused.body())).toMatchObject({ code: 'unavailable', status: 503 });
    closeAll();
    await expect
      .poll(async () => {
        const again = await connect(carol);
        again.close();
        return again.status;
      })
      .toBe(200);
  });

  it('ends a stream when the access token that opened it expires', async () => {
    closeAll();
    const shortLived = await mintAccessToken(service, carol.accessToken, { exp: Math.floor(Date.now() / 1000) + 3 });
    let sse = await connect({ auth: `Bearer ${shortLived}` });
    // The slots of the streams just closed are given back as the server sees them close.
    for (let i = 0; sse.status !== 200 && i < 50; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      sse = await connect({ auth: `Bearer ${shortLived}` });
    }
    expect(sse.status).toBe(200);
    await withTimeout(sse.ended, 15_000, 'the stream of an expired token did not end');
  });
});

describe('live stream visibility', () => {
  // The default heartbeat (15 s): role changes must not wait for it.
  const service = serviceForFile({}, { listen: true });
  const alice = userForFile(service);
  const bob = userForFile(service);
  const admin = userForFile(service, { admin: true });
  const otherAdmin = userForFile(service, { admin: true });
  const { connect } = streamsTo(service);

  it("stops sending others' events to a demoted admin with the next event", async () => {
    const sse = await connect(admin);
    await createTask(service, alice, { title: 'seen while admin' });
    await sse.until((frames) => eventCount(frames) === 1);
    await service.http
      .patch(`/users/${admin.user.id}`)
      .set('Authorization', otherAdmin.auth)
      .send({ role: 'user' })
      .expect(200);
    await sse.until(() => sse.events().some((e) => e.type === 'user.updated'));
    await createTask(service, alice, { title: 'after the demotion' });
    const own = await createTask(service, admin, { title: 'own, after the demotion' });
    await sse.until(() => sse.events().some((e) => e.type === 'task.created' && e.data.task.id === own.id));
    const titles = sse.events().flatMap((e) => (e.type === 'task.created' ? [e.data.task.title] : []));
    expect(titles).toEqual(['seen while admin', 'own, after the demotion']);
  });

  it("shows the actor of an admin's change only where the receiver may know it", async () => {
    const sse = await connect(alice);
    const tag = (
      await service.http.post('/tags').set('Authorization', alice.auth).send({ name: 'streamed tag' }).expect(201)
    ).body as { id: string };
    await service.http
      .patch(`/tags/${tag.id}`)
      .set('Authorization', otherAdmin.auth)
      .send({ name: 'renamed' })
      .expect(200);
    const task = await createTask(service, alice, { title: 'actor in stream' });
    await service.http
      .patch(`/tasks/${task.id}`)
      .set('Authorization', otherAdmin.auth)
      .send({ title: 'by an admin' })
      .expect(200);
    await sse.until((frames) => eventCount(frames) === 4);
    expect(sse.events().map((e) => [e.type, e.actorId])).toEqual([
      ['tag.created', alice.user.id],
      ['tag.updated', null],
      ['task.created', alice.user.id],
      ['task.updated', otherAdmin.user.id],
    ]);
  });

  it("answers the same 400 to a Last-Event-ID of another user's event and to an unknown one", async () => {
    const first = await connect(bob);
    await createTask(service, bob, { title: "bob's own" });
    await first.until((frames) => eventCount(frames) === 1);
    const bobsEvent = first.events()[0]?.id ?? '';
    first.close();
    const answer = async (id: string) => {
      const res = await service.http.get('/events').set('Authorization', alice.auth).set('Last-Event-ID', id);
      const problem = expectProblem(res, 400, 'validation_failed');
      return { detail: problem.detail, errors: problem.errors };
    };
    const others = await answer(bobsEvent);
    // Unknown, yet minted within the retention (an older one is 410 `cursor_expired`).
    const unknown = await answer(uuidv7());
    expect(others).toEqual(unknown);
    expect(others.errors?.map((e) => e.path)).toEqual(['header.last-event-id']);
    // Bob himself resumes after it.
    const resumed = await connect(bob, { 'Last-Event-ID': bobsEvent });
    expect(resumed.status).toBe(200);
  });
});

describe('live stream caps across worker processes', () => {
  const service = serviceForFile();
  let spawned: ServiceProcess | undefined;
  const open: SseConnection[] = [];
  afterAll(async () => {
    for (const sse of open) sse.close();
    killIfRunning(spawned);
    await spawned?.exited;
  });

  it('counts EVENTS_MAX_STREAMS_PER_USER over every worker of the instance', async () => {
    if (!service.databaseUrl) throw new Error('needs a PostgreSQL database url');
    spawned = await startServiceProcess({
      DATABASE_URL: service.databaseUrl,
      DATA_DIR: service.ctx.config.dataDir,
      WEB_CONCURRENCY: '2',
      EVENTS_MAX_STREAMS_PER_USER: '3',
    });
    const user = await registerUser(service);
    const statuses: number[] = [];
    // New connections are dealt to the workers in turn: six of them reach both.
    for (let i = 0; i < 6; i++) {
      const sse = await openSse(spawned.url, { Authorization: user.auth });
      open.push(sse);
      statuses.push(sse.status);
    }
    expect(statuses).toEqual([200, 200, 200, 429, 429, 429]);
  }, 180_000);
});
