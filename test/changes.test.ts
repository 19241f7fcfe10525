import { describe, expect, it } from 'vitest';
import { AttachmentSchema } from '../contract/attachments.js';
import { ChangesPageSchema } from '../contract/events.js';
import { TagSchema } from '../contract/tags.js';
import { TaskSchema } from '../contract/tasks.js';
import { UserSchema } from '../contract/users.js';
import { purgeExpiredEvents } from '../server/events/log.js';
import { recordEvent } from '../server/events/outbox.js';
import { serviceForFile } from './support/app.js';
import { createPersonalToken } from './support/personal-tokens.js';
import { feedSettled, ofType, readAllChanges } from './support/events.js';
import { errorPaths, expectProblem } from './support/problems.js';
import { createTask } from './support/tasks.js';
import { registerUser, type TestUser, userForFile } from './support/users.js';

const service = serviceForFile();
const alice = userForFile(service);
const bob = userForFile(service);
const admin = userForFile(service, { admin: true });

/** The cursor at the end of the caller's feed now: what follows it is what the next steps did. */
const endOfFeed = async (user: TestUser) => (await readAllChanges(service, user)).cursor;

describe('the outbox: one event per change, with the state after it', () => {
  it('records task.created, one task.updated for a PATCH of three fields, and a task.deleted tombstone', async () => {
    const cursor = await endOfFeed(alice);
    const task = await createTask(service, alice, { title: 'Write report' });
    const patched = TaskSchema.parse(
      (
        await service.http
          .patch(`/tasks/${task.id}`)
          .set('Authorization', alice.auth)
          .send({ title: 'Report', status: 'done', priority: 'high' })
          .expect(200)
      ).body,
    );
    await service.http.delete(`/tasks/${task.id}`).set('Authorization', alice.auth).expect(204);
    const { events } = await readAllChanges(service, alice, cursor);
    expect(events.map((e) => e.type)).toEqual(['task.created', 'task.updated', 'task.deleted']);
    const [created, updated, deleted] = events;
    expect(created?.data).toEqual({ task });
    // Only what the PATCH changed, as it was (completedAt follows the status): never version or updatedAt.
    expect(updated?.data).toEqual({
      task: patched,
      previous: { title: 'Write report', status: 'todo', priority: 'medium', completedAt: null },
    });
    expect(deleted?.data).toEqual({ taskId: task.id });
    for (const event of events) expect(event.actorId).toBe(alice.user.id);
  });

  it('records nothing for a no-op write or a refused one', async () => {
    const task = await createTask(service, alice, { title: 'Same' });
    const cursor = await endOfFeed(alice);
    await service.http.patch(`/tasks/${task.id}`).set('Authorization', alice.auth).send({ title: 'Same' }).expect(200);
    await service.http
      .patch(`/tasks/${task.id}`)
      .set('Authorization', alice.auth)
      .set('If-Match', '"99"')
      .send({ title: 'Other' })
      .expect(412);
    await service.http.post('/tags').set('Authorization', alice.auth).send({ name: '' }).expect(400);
    expect((await readAllChanges(service, alice, cursor)).events).toEqual([]);
  });

  it('records tag events, and task.updated for every task a tag link, rename or deletion changes', async () => {
    const cursor = await endOfFeed(alice);
    const tag = TagSchema.parse(
      (await service.http.post('/tags').set('Authorization', alice.auth).send({ name: 'feed-tag' }).expect(201)).body,
    );
    const task = await createTask(service, alice);
    await service.http.post(`/tasks/${task.id}/tags/${tag.id}`).set('Authorization', alice.auth).expect(201);
    await service.http.post(`/tasks/${task.id}/tags/${tag.id}`).set('Authorization', alice.auth).expect(200); // already there: no change
    const renamed = TagSchema.parse(
      (
        await service.http
          .patch(`/tags/${tag.id}`)
          .set('Authorization', alice.auth)
          .send({ name: 'renamed' })
          .expect(200)
      ).body,
    );
    await service.http.delete(`/tags/${tag.id}`).set('Authorization', alice.auth).expect(204);
    const { events } = await readAllChanges(service, alice, cursor);
    expect(events.map((e) => e.type)).toEqual([
      'tag.created',
      'task.created',
      'task.updated',
      'tag.updated',
      'task.updated',
      'tag.deleted',
      'task.updated',
    ]);
    expect(events[0]?.data).toEqual({ tag });
    expect(events[3]?.data).toEqual({ tag: renamed });
    const updates = ofType(events, 'task.updated').map((e) => e.data.task);
    expect(updates.map((t) => t.tags.map((x) => x.name))).toEqual([['feed-tag'], ['renamed'], []]);
    expect(updates.map((t) => t.version)).toEqual([2, 3, 4]);
    expect(events[5]?.data).toEqual({ tagId: tag.id });
  });

  it('records attachment.created and .deleted, each with the task.updated of its attachment count', async () => {
    const task = await createTask(service, alice);
    const cursor = await endOfFeed(alice);
    const attachment = AttachmentSchema.parse(
      (
        await service.http
          .post(`/tasks/${task.id}/attachments`)
          .set('Authorization', alice.auth)
          .attach('file', Buffer.from('hello'), { filename: 'a.txt' })
          .expect(201)
      ).body,
    );
    await service.http.delete(`/attachments/${attachment.id}`).set('Authorization', alice.auth).expect(204);
    const { events } = await readAllChanges(service, alice, cursor);
    expect(events.map((e) => e.type)).toEqual([
      'attachment.created',
      'task.updated',
      'attachment.deleted',
      'task.updated',
    ]);
    expect(events[0]?.data).toEqual({ attachment });
    expect(ofType(events, 'task.updated').map((e) => e.data.task.attachmentCount)).toEqual([1, 0]);
    expect(events[2]?.data).toEqual({ attachmentId: attachment.id, taskId: task.id });
  });

  it('records user.updated, and user.deleted with tombstones for what went with the account', async () => {
    const carol = await registerUser(service);
    const task = await createTask(service, carol, { assigneeId: bob.user.id });
    const cursor = await endOfFeed(admin);
    const bobCursor = await endOfFeed(bob);
    const user = UserSchema.parse(
      (
        await service.http
          .patch(`/users/${carol.user.id}`)
          .set('Authorization', carol.auth)
          .send({ name: 'Carol' })
          .expect(200)
      ).body,
    );
    await service.http.delete(`/users/${carol.user.id}`).set('Authorization', admin.auth).expect(204);
    const { events } = await readAllChanges(service, admin, cursor);
    expect(events.map((e) => e.type)).toEqual(['user.updated', 'user.deleted', 'task.deleted']);
    expect(events[0]?.data).toEqual({ user });
    expect(events[1]?.data).toEqual({ userId: carol.user.id });
    // The assignee learns that the task is gone.
    expect((await readAllChanges(service, bob, bobCursor)).events.map((e) => e.data)).toEqual([{ taskId: task.id }]);
  });
});

describe('GET /changes', () => {
  it('pages through the feed in order with nextCursor always present, and an empty page when up to date', async () => {
    const cursor = await endOfFeed(alice);
    const tasks = [];
    for (let i = 0; i < 5; i++) tasks.push(await createTask(service, alice, { title: `paged ${i}` }));
    await feedSettled(service);
    const seen: string[] = [];
    let next = cursor;
    for (let page = 0; page < 3; page++) {
      const res = await service.http
        .get('/changes')
        .query({ cursor: next, limit: 2 })
        .set('Authorization', alice.auth)
        .expect(200);
      const body = ChangesPageSchema.parse(res.body);
      seen.push(...ofType(body.items, 'task.created').map((e) => e.data.task.id));
      next = body.nextCursor;
    }
    expect(seen).toEqual(tasks.map((t) => t.id));
    const empty = ChangesPageSchema.parse(
      (await service.http.get('/changes').query({ cursor: next }).set('Authorization', alice.auth).expect(200)).body,
    );
    expect(empty.items).toEqual([]);
    expect(empty.nextCursor).toEqual(expect.any(String));
  });

  it('starts at the oldest retained event without a cursor', async () => {
    const { events } = await readAllChanges(service, alice, undefined, 1000);
    expect(events.length).toBeGreaterThan(10);
    expect(new Set(events.map((e) => e.id)).size).toBe(events.length);
  });

  it('answers 400 to a bad limit or a forged cursor, and 401 without a token', async () => {
    for (const limit of ['0', '1001', 'x']) {
      expect(
        errorPaths(
          expectProblem(
            await service.http.get('/changes').query({ limit }).set('Authorization', alice.auth),
            400,
            'validation_failed',
          ),
        ),
      ).toEqual(['query.limit']);
    }
    for (const cursor of [
      'nonsense',
      Buffer.from('1.x').toString('base64url'),
      Buffer.from('99999999999999999999.1').toString('base64url'),
    ]) {
      expect(
        errorPaths(
          expectProblem(
            await service.http.get('/changes').query({ cursor }).set('Authorization', alice.auth),
            400,
            'validation_failed',
          ),
        ),
      ).toEqual(['query.cursor']);
    }
    expectProblem(await service.http.get('/changes'), 401, 'unauthenticated');
  });

  it('signs its cursors: a forged, altered or out-of-range cursor is 400, never 200 or 5xx', async () => {
    const issued = await endOfFeed(alice);
    const flipped = `${issued.slice(0, -1)}${issued.endsWith('A') ? 'B' : 'A'}`;
    const forged = [
      Buffer.from('1.0').toString('base64url'),
      Buffer.from('9223372036854775807.0').toString('base64url'),
      Buffer.from('9999999999999999999.1').toString('base64url'),
      flipped,
      `${Buffer.from('1.0').toString('base64url')}.${issued.split('.')[1] ?? ''}`,
    ];
    for (const cursor of forged) {
      const res = await service.http.get('/changes').query({ cursor }).set('Authorization', alice.auth);
      expect(errorPaths(expectProblem(res, 400, 'validation_failed')), cursor).toEqual(['query.cursor']);
    }
    // A list cursor is signed by the same service, but it is not a position in the feed.
    await service.http.post('/tags').set('Authorization', alice.auth).send({ name: 'cursor a' }).expect(201);
    await service.http.post('/tags').set('Authorization', alice.auth).send({ name: 'cursor b' }).expect(201);
    const tags = await service.http.get('/tags').query({ limit: 1 }).set('Authorization', alice.auth).expect(200);
    const listCursor = String(tags.body.nextCursor);
    expectProblem(
      await service.http.get('/changes').query({ cursor: listCursor }).set('Authorization', alice.auth),
      400,
      'validation_failed',
    );
    await service.http.get('/changes').query({ cursor: issued }).set('Authorization', alice.auth).expect(200);
  });

  it("names the actor only to that user, an admin, or the task's owner or assignee", async () => {
    const cursor = await endOfFeed(admin);
    const task = await createTask(service, alice, { title: 'actor', assigneeId: bob.user.id });
    await service.http
      .patch(`/tasks/${task.id}`)
      .set('Authorization', admin.auth)
      .send({ title: 'by the admin' })
      .expect(200);
    const tag = TagSchema.parse(
      (await service.http.post('/tags').set('Authorization', alice.auth).send({ name: 'actor tag' }).expect(201)).body,
    );
    await service.http
      .patch(`/tags/${tag.id}`)
      .set('Authorization', admin.auth)
      .send({ name: 'renamed by the admin' })
      .expect(200);
    await service.http
      .patch(`/users/${alice.user.id}`)
      .set('Authorization', admin.auth)
      .send({ name: 'Renamed by the admin' })
      .expect(200);
    await service.http
      .patch(`/tasks/${task.id}`)
      .set('Authorization', admin.auth)
      .send({ assigneeId: null })
      .expect(200);
    const actors = async (user: TestUser) =>
      (await readAllChanges(service, user, cursor)).events.map((e) => [e.type, e.actorId]);
    // The owner and the assignee of a task see who changed it; the admin's other changes stay anonymous.
    expect(await actors(alice)).toEqual([
      ['task.created', alice.user.id],
      ['task.updated', admin.user.id],
      ['tag.created', alice.user.id],
      ['tag.updated', null],
      ['user.updated', null],
      ['task.updated', admin.user.id],
    ]);
    // Bob, removed as assignee by the last change, gets that change without its actor.
    expect(await actors(bob)).toEqual([
      ['task.created', alice.user.id],
      ['task.updated', admin.user.id],
      ['task.updated', null],
    ]);
    expect((await actors(admin)).map(([, actor]) => actor)).toEqual([
      alice.user.id,
      admin.user.id,
      alice.user.id,
      admin.user.id,
      admin.user.id,
      admin.user.id,
    ]);
  });

  it("never shows another user's events; an assignee sees a task until the update that removes them", async () => {
    const bobCursor = await endOfFeed(bob);
    const secret = await createTask(service, alice, { title: 'private' });
    const shared = await createTask(service, alice, { title: 'shared', assigneeId: bob.user.id });
    await service.http
      .patch(`/tasks/${shared.id}`)
      .set('Authorization', alice.auth)
      .send({ title: 'shared 2' })
      .expect(200);
    await service.http
      .patch(`/tasks/${shared.id}`)
      .set('Authorization', alice.auth)
      .send({ assigneeId: null })
      .expect(200);
    await service.http
      .patch(`/tasks/${shared.id}`)
      .set('Authorization', alice.auth)
      .send({ title: 'after bob left' })
      .expect(200);
    await service.http
      .patch(`/tasks/${secret.id}`)
      .set('Authorization', alice.auth)
      .send({ title: 'still private' })
      .expect(200);
    await service.http.post('/tags').set('Authorization', alice.auth).send({ name: 'alice only' }).expect(201);
    const { events } = await readAllChanges(service, bob, bobCursor);
    expect(events.map((e) => [e.type, 'task' in e.data ? e.data.task.title : undefined])).toEqual([
      ['task.created', 'shared'],
      ['task.updated', 'shared 2'],
      ['task.updated', 'shared 2'],
    ]);
    const adminSees = (await readAllChanges(service, admin, bobCursor)).events.map((e) => e.type);
    expect(adminSees).toEqual([
      'task.created',
      'task.created',
      'task.updated',
      'task.updated',
      'task.updated',
      'task.updated',
      'tag.created',
    ]);
  });

  it('shows a personal access token only the events its other scopes let it read', async () => {
    const owner = await registerUser(service);
    const task = await createTask(service, owner, { title: 'Secret plans' });
    await service.http.post('/tags').set('Authorization', owner.auth).send({ name: 'secret' }).expect(201);
    await service.http.patch(`/users/${owner.user.id}`).set('Authorization', owner.auth).send({ name: 'Renamed' });
    await service.http.delete(`/tasks/${task.id}`).set('Authorization', owner.auth).expect(204);
    const typesSeenWith = async (scopes: Parameters<typeof createPersonalToken>[2], limit?: number) => {
      const pat = await createPersonalToken(service, owner, scopes);
      return (await readAllChanges(service, pat, undefined, limit)).events.map((event) => event.type);
    };
    const everything = (await readAllChanges(service, owner)).events.map((event) => event.type);
    expect(everything).toEqual(['task.created', 'tag.created', 'user.updated', 'task.deleted']);
    expect(await typesSeenWith(['events:read'])).toEqual([]);
    expect(await typesSeenWith(['events:read', 'tasks:read'])).toEqual(['task.created', 'task.deleted']);
    // A page of one still reaches the one event past those the token may not read.
    expect(await typesSeenWith(['events:read', 'tags:write'], 1)).toEqual(['tag.created']);
    expect(await typesSeenWith(['events:read', 'account:read'])).toEqual(['user.updated']);
  });

  it('answers 410 cursor_expired once the retention purge deleted events after the cursor', async () => {
    const cursor = await endOfFeed(alice);
    await createTask(service, alice, { title: 'soon purged' });
    const later = new Date(Date.now() + (service.ctx.config.events.retentionDays + 1) * 24 * 3600 * 1000);
    expect(await purgeExpiredEvents(service.ctx, later)).toBeGreaterThan(0);
    expectProblem(
      await service.http.get('/changes').query({ cursor }).set('Authorization', alice.auth),
      410,
      'cursor_expired',
    );
    // A client that does a full sync follows the feed from its start again.
    const fresh = await readAllChanges(service, alice);
    expect(fresh.events).toEqual([]);
    await createTask(service, alice, { title: 'after purge' });
    expect((await readAllChanges(service, alice, fresh.cursor)).events.map((e) => e.type)).toEqual(['task.created']);
  });
});

describe('commit order under concurrent writers', () => {
  it('never skips a transaction that commits after later ones', async () => {
    const cursor = await endOfFeed(admin);
    let releaseLate!: () => void;
    const lateMayCommit = new Promise<void>((resolve) => (releaseLate = resolve));
    let lateRecorded!: () => void;
    const recorded = new Promise<void>((resolve) => (lateRecorded = resolve));
    const late = service.ctx.db.sql.transaction(async (tx) => {
      await recordEvent(tx, null, { type: 'user.deleted', data: { userId: alice.user.id }, audience: [] });
      lateRecorded();
      await lateMayCommit;
    });
    await recorded;
    // Later transactions commit first; the feed stops before the one still running.
    const early = await createTask(service, admin, { title: 'committed first' });
    const before = await readAllChanges(service, admin, cursor, 100, { settle: false });
    expect(before.events).toEqual([]);
    releaseLate();
    await late;
    const after = await readAllChanges(service, admin, before.cursor);
    expect(after.events.map((e) => e.type)).toEqual(['user.deleted', 'task.created']);
    expect(ofType(after.events, 'task.created')[0]?.data.task.id).toBe(early.id);
  });

  it('delivers every event exactly once to a reader polling while many writers commit out of order', async () => {
    const cursor = await endOfFeed(admin);
    const writers = 40;
    const written = Promise.all(
      Array.from({ length: writers }, (_, i) =>
        service.ctx.db.sql.transaction(async (tx) => {
          await recordEvent(tx, null, {
            type: 'tag.deleted',
            data: { tagId: `00000000-0000-7000-8000-${String(i).padStart(12, '0')}` },
            audience: [],
          });
          // Hold some transactions open so that later ones commit first.
          await new Promise((resolve) => setTimeout(resolve, (i * 37) % 120));
        }),
      ),
    );
    let done = false;
    void written.then(() => (done = true));
    const seen: string[] = [];
    let next = cursor;
    while (!done || seen.length < writers) {
      // Once every writer committed, a settled read that finds nothing new means the reader is done.
      const finished = done;
      const page = await readAllChanges(service, admin, next, 7, { settle: finished });
      seen.push(...ofType(page.events, 'tag.deleted').map((e) => e.data.tagId));
      next = page.cursor;
      if (finished && page.events.length === 0) break;
    }
    await written;
    expect(seen.length).toBe(writers);
    expect(new Set(seen).size).toBe(writers);
  });
});

describe('events of row-locked writes under concurrency', () => {
  it('records one task.updated per change that took, each with the state it committed, and one tombstone of concurrent deletes', async () => {
    const task = await createTask(service, alice, { title: 'contended' });
    const cursor = await endOfFeed(alice);
    const patch = (body: object, ifMatch?: string) => {
      const req = service.http.patch(`/tasks/${task.id}`).set('Authorization', alice.auth);
      return (ifMatch === undefined ? req : req.set('If-Match', ifMatch)).send(body);
    };
    // Without If-Match every PATCH applies in turn; with the same If-Match one wins, the rest are 412.
    const free = await Promise.all(Array.from({ length: 6 }, (_, i) => patch({ title: `free ${i}` })));
    expect(free.map((res) => res.status)).toEqual(Array(6).fill(200));
    const current = TaskSchema.parse(
      (await service.http.get(`/tasks/${task.id}`).set('Authorization', alice.auth).expect(200)).body,
    );
    const guarded = await Promise.all(
      Array.from({ length: 4 }, (_, i) => patch({ title: `guarded ${i}` }, `"${current.version}"`)),
    );
    expect(guarded.filter((res) => res.status === 200)).toHaveLength(1);
    expect(guarded.filter((res) => res.status === 412)).toHaveLength(3);
    const final = TaskSchema.parse(guarded.find((res) => res.status === 200)?.body);
    const deletes = await Promise.all(
      Array.from({ length: 3 }, () => service.http.delete(`/tasks/${task.id}`).set('Authorization', alice.auth)),
    );
    expect(deletes.map((res) => res.status).sort()).toEqual([204, 404, 404]);

    const { events } = await readAllChanges(service, alice, cursor);
    const updates = ofType(events, 'task.updated').map((event) => event.data.task);
    // Each event holds the state its write committed, and the feed has them in commit order.
    expect(updates.map((t) => t.version)).toEqual(Array.from({ length: 7 }, (_, i) => task.version + 1 + i));
    expect(new Set(updates.map((t) => t.title)).size).toBe(7);
    expect(updates.at(-1)).toEqual(final);
    expect(ofType(events, 'task.deleted').map((event) => event.data.taskId)).toEqual([task.id]);
    expect(events.at(-1)?.type).toBe('task.deleted');
  });
});
