import { describe, expect, it } from 'vitest';
import { TaskSchema } from '../contract/tasks.js';
import { serviceForFile, startService, type TestService } from './support/app.js';
import { errorPaths, expectProblem } from './support/problems.js';
import { tables } from '../server/db/query.js';
import { countAttachments, countOf } from './support/rows.js';
import { createTask } from './support/tasks.js';
import { registerUser, type TestUser, userForFile } from './support/users.js';

const service = serviceForFile();
let keyCount = 0;
const freshKey = () => `key-${Date.now()}-${++keyCount}`;
const alice = userForFile(service);
const bob = userForFile(service);

const postTask = (user: TestUser, key: string, body: Record<string, unknown>) =>
  service.http.post('/tasks').set('Authorization', user.auth).set('Idempotency-Key', key).send(body);

/** What a process killed mid-request leaves behind: the user's claim on `key`, `ageMs` old, with no answer. */
async function abandonedClaim(on: TestService, user: TestUser, key: string, ageMs: number): Promise<void> {
  await on.ctx.db.sql.write(
    tables.deleteFrom('idempotency_keys').where('user_id', '=', user.user.id).where('key', '=', key),
  );
  const createdAt = new Date(Date.now() - ageMs);
  await on.ctx.db.sql.write(
    tables.insertInto('idempotency_keys').values({
      user_id: user.user.id,
      key,
      fingerprint: 'of a request that died',
      created_at: createdAt,
      expires_at: new Date(createdAt.getTime() + 24 * 3600 * 1000),
    }),
  );
}

const tasksTitled = async (title: string) =>
  countOf(service.ctx.db.sql, tables.selectFrom('tasks').where('title', '=', title));

describe('Idempotency-Key', () => {
  it('replays the first answer to the same request, with Idempotent-Replayed, and creates nothing more', async () => {
    const key = freshKey();
    const first = await postTask(alice, key, { title: 'once', priority: 'high' }).expect(201);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    // JSON-equal: the same fields in another order.
    const again = await postTask(alice, key, { priority: 'high', title: 'once' }).expect(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual(first.body);
    expect(again.headers.location).toBe(first.headers.location);
    expect(again.headers.etag).toBe(first.headers.etag);
    expect(again.headers['content-type']).toBe(first.headers['content-type']);
    expect(await tasksTitled('once')).toBe(1);
  });

  it('answers 422 to the same key with a different request, and keeps keys per caller', async () => {
    const key = freshKey();
    await postTask(alice, key, { title: 'first use' }).expect(201);
    expectProblem(await postTask(alice, key, { title: 'another request' }), 422, 'idempotency_key_reused');
    expectProblem(
      await service.http.post('/tags').set('Authorization', alice.auth).set('Idempotency-Key', key).send({ name: 'x' }),
      422,
      'idempotency_key_reused',
    );
    const bobs = TaskSchema.parse((await postTask(bob, key, { title: 'first use' }).expect(201)).body);
    expect(bobs.ownerId).toBe(bob.user.id);
    expect(await tasksTitled('another request')).toBe(0);
  });

  it('keeps the 4xx answer of a request that ran, not one the contract refused, and answers 400 to a malformed key', async () => {
    const key = freshKey();
    const unknownUser = { title: 'for nobody', assigneeId: '01900000-0000-7000-8000-000000000000' };
    const refused = await postTask(alice, key, unknownUser);
    expectProblem(refused, 400, 'validation_failed');
    const replay = await postTask(alice, key, unknownUser);
    expect(replay.status).toBe(400);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body).toEqual(refused.body);
    // A body the contract refuses is validated again on every retry: nothing was kept for it.
    const invalidKey = freshKey();
    expectProblem(await postTask(alice, invalidKey, { title: '' }), 400, 'validation_failed');
    const again = await postTask(alice, invalidKey, { title: '' });
    expect(again.headers['idempotent-replayed']).toBeUndefined();
    await postTask(alice, invalidKey, { title: 'now valid' }).expect(201);
    for (const bad of ['x'.repeat(256), 'tab\there', 'ünïcode']) {
      const res = await service.http
        .post('/tasks')
        .set('Authorization', alice.auth)
        .set('Idempotency-Key', bad)
        .send({ title: 'bad key' });
      expect(errorPaths(expectProblem(res, 400, 'validation_failed'))).toEqual(['header.idempotency-key']);
    }
    expect(await tasksTitled('bad key')).toBe(0);
  });

  it('answers 400, not 500, to a body nested deeper than any the contract takes (found by the fuzzer)', async () => {
    const deep = `${'['.repeat(5_000)}${']'.repeat(5_000)}`;
    const res = await service.http
      .post('/tasks')
      .set('Authorization', alice.auth)
      .set('Idempotency-Key', 'deep-body')
      .set('Content-Type', 'application/json')
      .send(deep);
    expect(errorPaths(expectProblem(res, 400, 'validation_failed'))).toEqual(['body']);
  });

  it('runs a request again once its key expired after 24 hours', async () => {
    const key = freshKey();
    await postTask(alice, key, { title: 'expiring' }).expect(201);
    await service.ctx.db.sql.write(
      tables
        .updateTable('idempotency_keys')
        .set({ expires_at: new Date(Date.now() - 1000) })
        .where('key', '=', key),
    );
    const again = await postTask(alice, key, { title: 'expiring' }).expect(201);
    expect(again.headers['idempotent-replayed']).toBeUndefined();
    expect(await tasksTitled('expiring')).toBe(2);
  });

  it('frees a key whose request died before committing after 60 s, never 24 hours', async () => {
    const key = freshKey();
    const claimed = (ageMs: number) => abandonedClaim(service, alice, key, ageMs);
    await claimed(30_000);
    expectProblem(await postTask(alice, key, { title: 'after a crash' }), 422, 'idempotency_key_reused');
    await claimed(61_000);
    const res = await postTask(alice, key, { title: 'after a crash' }).expect(201);
    expect(res.headers['idempotent-replayed']).toBeUndefined();
    const replay = await postTask(alice, key, { title: 'after a crash' }).expect(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(await tasksTitled('after a crash')).toBe(1);
  });

  it('frees such a key after IDEMPOTENCY_ABANDONED_SECONDS when it is set', async () => {
    const quick = await startService({ IDEMPOTENCY_ABANDONED_SECONDS: '5' });
    try {
      const dave = await registerUser(quick);
      const key = freshKey();
      const claimed = (ageMs: number) => abandonedClaim(quick, dave, key, ageMs);
      const post = () =>
        quick.http.post('/tasks').set('Authorization', dave.auth).set('Idempotency-Key', key).send({ title: 'soon' });
      await claimed(3_000);
      expectProblem(await post(), 422, 'idempotency_key_reused');
      await claimed(6_000);
      expect((await post().expect(201)).headers['idempotent-replayed']).toBeUndefined();
    } finally {
      await quick.close();
    }
  });

  it('keeps at most IDEMPOTENCY_MAX_KEYS_PER_USER answers a caller, the oldest expiring first', async () => {
    const capped = await startService({ IDEMPOTENCY_MAX_KEYS_PER_USER: '3' });
    try {
      const carol = await registerUser(capped);
      const post = (key: string) =>
        capped.http.post('/tags').set('Authorization', carol.auth).set('Idempotency-Key', key).send({ name: key });
      for (const key of ['k1', 'k2', 'k3', 'k4', 'k5']) await post(key).expect(201);
      const kept = await capped.ctx.db.sql.all(
        tables
          .selectFrom('idempotency_keys')
          .selectAll()
          .where('user_id', '=', carol.user.id)
          .orderBy('created_at', 'asc'),
      );
      expect(kept.map((row) => row.key)).toEqual(['k3', 'k4', 'k5']);
      expect((await post('k5').expect(201)).headers['idempotent-replayed']).toBe('true');
      // k1 expired early: it runs again (a tag of that name exists now, so this is its 409).
      const rerun = await post('k1');
      expect(rerun.headers['idempotent-replayed']).toBeUndefined();
      expectProblem(rerun, 409, 'tag_name_taken');
    } finally {
      await capped.close();
    }
  });

  it('creates exactly one resource when a request is retried concurrently (409 while the first runs)', async () => {
    for (let round = 0; round < 5; round++) {
      const key = freshKey();
      const title = `concurrent ${round}`;
      const answers = await Promise.all(Array.from({ length: 8 }, () => postTask(alice, key, { title })));
      const created = answers.filter((res) => res.status === 201);
      for (const res of answers.filter((r) => r.status !== 201)) expectProblem(res, 409, 'idempotency_key_in_use');
      expect(created.length).toBeGreaterThanOrEqual(1);
      expect(new Set(created.map((res) => TaskSchema.parse(res.body).id)).size).toBe(1);
      expect(await tasksTitled(title)).toBe(1);
      const after = await postTask(alice, key, { title }).expect(201);
      expect(after.headers['idempotent-replayed']).toBe('true');
    }
  });

  it('replays an upload of the same file and refuses other bytes under the same key', async () => {
    const task = await createTask(service, alice);
    const key = freshKey();
    const upload = (bytes: string) =>
      service.http
        .post(`/tasks/${task.id}/attachments`)
        .set('Authorization', alice.auth)
        .set('Idempotency-Key', key)
        .attach('file', Buffer.from(bytes), { filename: 'a.txt' });
    const first = await upload('same bytes').expect(201);
    const again = await upload('same bytes').expect(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual(first.body);
    expectProblem(await upload('other bytes'), 422, 'idempotency_key_reused');
    expect(await countAttachments(service.ctx.db.sql, task.id)).toBe(1);
  });

  it('applies to every creating POST: tags, tag links and webhooks', async () => {
    const key = freshKey();
    const tag = await service.http
      .post('/tags')
      .set('Authorization', alice.auth)
      .set('Idempotency-Key', key)
      .send({ name: 'idem' })
      .expect(201);
    const replay = await service.http
      .post('/tags')
      .set('Authorization', alice.auth)
      .set('Idempotency-Key', key)
      .send({ name: 'idem' })
      .expect(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body).toEqual(tag.body);
  });

  it("applies to a task's comments and relations: a replay answers the same 201 and makes nothing twice", async () => {
    const [task, other] = [await createTask(service, alice), await createTask(service, alice)];
    const post = (path: string, key: string, body: object) =>
      service.http.post(path).set('Authorization', alice.auth).set('Idempotency-Key', key).send(body);
    const rowsOf = async () => ({
      comments: await countOf(service.ctx.db.sql, tables.selectFrom('comments').where('task_id', '=', task.id)),
      relations: await countOf(service.ctx.db.sql, tables.selectFrom('task_relations').where('task_id', '=', task.id)),
      events: await countOf(
        service.ctx.db.sql,
        tables
          .selectFrom('events')
          .where('actor_id', '=', alice.user.id)
          .where('type', 'in', ['comment.created', 'relation.created', 'task.updated']),
      ),
    });
    for (const [path, body] of [
      [`/tasks/${task.id}/comments`, { body: 'said once' }],
      [`/tasks/${task.id}/relations`, { type: 'blocks', taskId: other.id }],
    ] as const) {
      const key = freshKey();
      const first = await post(path, key, body).expect(201);
      const made = await rowsOf();
      const again = await post(path, key, body).expect(201);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body).toEqual(first.body);
      expect(again.headers.location).toBe(first.headers.location);
      expect(await rowsOf()).toEqual(made);
    }
    // The blocked task changed once: blocked, one version on.
    const blocked = TaskSchema.parse(
      (await service.http.get(`/tasks/${other.id}`).set('Authorization', alice.auth).expect(200)).body,
    );
    expect(blocked).toMatchObject({ blocked: true, version: other.version + 1 });
    expect((await rowsOf()).comments).toBe(1);
  });
});
