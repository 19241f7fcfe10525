import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import { describe, expect, it } from 'vitest';
import { ActivityEntrySchema, type ActivityEntry } from '../contract/activity.js';
import { CommentSchema } from '../contract/comments.js';
import { pageOf } from '../contract/common.js';
import { ProjectSchema } from '../contract/projects.js';
import { TagSchema } from '../contract/tags.js';
import { rawQuery } from '../server/db/query.js';
import { purgeExpiredEvents } from '../server/events/log.js';
import { serviceForFile } from './support/app.js';
import { expectProblem } from './support/problems.js';
import { createTask } from './support/tasks.js';
import { userForFile, type TestUser } from './support/users.js';

// A task's activity over HTTP: one entry per change since its creation, newest first, each with the
// event type that reported it and what changed; kept past the event retention, gone with the task.
const service = serviceForFile();
const alice = userForFile(service);
const bob = userForFile(service);
const outsider = userForFile(service);

const ActivityPageSchema = pageOf(ActivityEntrySchema);
const as = (user: { auth: string }) => ({ Authorization: user.auth });

async function activityOf(user: TestUser, taskId: string, limit = 100): Promise<ActivityEntry[]> {
  const items: ActivityEntry[] = [];
  let cursor: string | null = null;
  do {
    const res = await service.http
      .get(`/tasks/${taskId}/activity`)
      .query({ limit, ...(cursor ? { cursor } : {}) })
      .set(as(user))
      .expect(200);
    const page = ActivityPageSchema.parse(res.body);
    items.push(...page.items);
    cursor = page.nextCursor;
  } while (cursor);
  return items;
}

const activityRows = async (taskId: string) =>
  (
    await service.ctx.db.sql.all(
      rawQuery(sql<{ n: number }>`SELECT count(*)::int AS n FROM task_activity WHERE task_id = ${taskId}::uuid`),
    )
  )[0]?.n;

describe("a task's activity", () => {
  it('lists every change since its creation, newest first, one entry each, with the event type and what changed', async () => {
    const tag = TagSchema.parse(
      (
        await service.http
          .post('/tags')
          .set(as(alice))
          .send({ name: `t-${uuidv7().slice(-6)}` })
          .expect(201)
      ).body,
    );
    const task = await createTask(service, alice, { title: 'Plan', priority: 'high', dueAt: '2027-01-01T00:00:00Z' });
    await service.http.patch(`/tasks/${task.id}`).set(as(alice)).send({ title: 'Plan B', status: 'done' }).expect(200);
    await service.http.post(`/tasks/${task.id}/tags/${tag.id}`).set(as(alice)).expect(201);
    const upload = await service.http
      .post(`/tasks/${task.id}/attachments`)
      .set(as(alice))
      .attach('file', Buffer.from('bytes'), { filename: 'a.txt', contentType: 'text/plain' })
      .expect(201);
    await service.http.delete(`/attachments/${upload.body.id}`).set(as(alice)).expect(204);
    const c = CommentSchema.parse(
      (await service.http.post(`/tasks/${task.id}/comments`).set(as(alice)).send({ body: 'hi' }).expect(201)).body,
    );
    await service.http.patch(`/comments/${c.id}`).set(as(alice)).send({ body: 'hi!' }).expect(200);
    await service.http.delete(`/comments/${c.id}`).set(as(alice)).expect(204);
    const project = ProjectSchema.parse(
      (await service.http.post('/projects').set(as(alice)).send({ name: 'moved' }).expect(201)).body,
    );
    // A move drops the personal tag: one change, one entry.
    await service.http.patch(`/tasks/${task.id}`).set(as(alice)).send({ projectId: project.id }).expect(200);

    const entries = await activityOf(alice, task.id);
    expect(entries.map((entry) => entry.type)).toEqual([
      'task.updated',
      'comment.deleted',
      'comment.updated',
      'comment.created',
      'attachment.deleted',
      'attachment.created',
      'task.updated',
      'task.updated',
      'task.created',
    ]);
    expect(entries.every((entry) => entry.actorId === alice.user.id)).toBe(true);
    const changes = entries.map((entry) => entry.changes);
    const tagRef = { id: tag.id, name: tag.name, color: tag.color };
    expect(changes[0]).toEqual([
      { field: 'projectId', from: null, to: project.id },
      { field: 'tags', from: [tagRef], to: [] },
    ]);
    expect(changes[1]).toEqual([{ field: 'comment', from: { id: c.id }, to: null }]);
    expect(changes[2]).toEqual([{ field: 'comment', from: { id: c.id }, to: { id: c.id } }]);
    expect(changes[3]).toEqual([{ field: 'comment', from: null, to: { id: c.id } }]);
    expect(changes[4]).toEqual([{ field: 'attachment', from: { id: upload.body.id }, to: null }]);
    expect(changes[5]).toEqual([{ field: 'attachment', from: null, to: { id: upload.body.id, filename: 'a.txt' } }]);
    expect(changes[6]).toEqual([{ field: 'tags', from: [], to: [tagRef] }]);
    expect(changes[7]).toEqual([
      { field: 'title', from: 'Plan', to: 'Plan B' },
      { field: 'status', from: 'todo', to: 'done' },
      { field: 'completedAt', from: null, to: expect.any(String) },
    ]);
    expect(changes[8]).toEqual([
      { field: 'title', from: null, to: 'Plan' },
      { field: 'status', from: null, to: 'todo' },
      { field: 'priority', from: null, to: 'high' },
      { field: 'dueAt', from: null, to: '2027-01-01T00:00:00.000Z' },
    ]);
    // Pages of one walk the same list.
    expect(await activityOf(alice, task.id, 2)).toEqual(entries);
  });

  it('is read by whoever sees the task: 404 for another user, 401 without a token, 400 for a forged cursor', async () => {
    const task = await createTask(service, alice, { assigneeId: bob.user.id });
    expect(await activityOf(bob, task.id)).toHaveLength(1);
    expectProblem(await service.http.get(`/tasks/${task.id}/activity`).set(as(outsider)), 404, 'not_found');
    expectProblem(await service.http.get(`/tasks/${uuidv7()}/activity`).set(as(alice)), 404, 'not_found');
    expectProblem(await service.http.get(`/tasks/${task.id}/activity`), 401, 'unauthenticated');
    expectProblem(
      await service.http.get(`/tasks/${task.id}/activity?cursor=forged`).set(as(alice)),
      400,
      'validation_failed',
    );
    // A cursor of another list (the comments', in creation order) is not this list's.
    for (let n = 0; n < 2; n++)
      await service.http
        .post(`/tasks/${task.id}/comments`)
        .set(as(alice))
        .send({ body: `c${n}` })
        .expect(201);
    const comments = await service.http.get(`/tasks/${task.id}/comments?limit=1`).set(as(alice)).expect(200);
    expectProblem(
      await service.http.get(`/tasks/${task.id}/activity`).query({ cursor: comments.body.nextCursor }).set(as(alice)),
      400,
      'validation_failed',
    );
  });

  it('outlives the event retention, and goes with the task', async () => {
    const task = await createTask(service, alice);
    await service.http.patch(`/tasks/${task.id}`).set(as(alice)).send({ title: 'later' }).expect(200);
    const before = await activityOf(alice, task.id);
    expect(before).toHaveLength(2);
    // Every event is past the retention then: the log is emptied, the activity kept.
    expect(await purgeExpiredEvents(service.ctx, new Date(Date.now() + 400 * 24 * 3600 * 1000))).toBeGreaterThan(0);
    expect(await activityOf(alice, task.id)).toEqual(before);
    await service.http.delete(`/tasks/${task.id}`).set(as(alice)).expect(204);
    expect(await activityRows(task.id)).toBe(0);
  });

  it("shows a relation made and removed on both tasks' activity, and the blocked task's flips as task.updated of `blocked`", async () => {
    const [blocker, blocked] = [await createTask(service, alice), await createTask(service, alice)];
    await service.http
      .post(`/tasks/${blocker.id}/relations`)
      .set(as(alice))
      .send({ type: 'blocks', taskId: blocked.id })
      .expect(201);
    // Removed from the blocked task's side: the relation as that side names it.
    await service.http.delete(`/tasks/${blocked.id}/relations/blocked_by/${blocker.id}`).set(as(alice)).expect(204);
    const made = { taskId: blocker.id, type: 'blocks', otherTaskId: blocked.id };
    const removed = { taskId: blocked.id, type: 'blocked_by', otherTaskId: blocker.id };
    const entries = async (taskId: string) =>
      (await activityOf(alice, taskId)).map((entry) => ({
        type: entry.type,
        actorId: entry.actorId,
        changes: entry.changes,
      }));
    const by = alice.user.id;
    expect(await entries(blocker.id)).toEqual([
      { type: 'relation.deleted', actorId: by, changes: [{ field: 'relation', from: removed, to: null }] },
      { type: 'relation.created', actorId: by, changes: [{ field: 'relation', from: null, to: made }] },
      { type: 'task.created', actorId: by, changes: expect.any(Array) },
    ]);
    expect(await entries(blocked.id)).toEqual([
      { type: 'task.updated', actorId: by, changes: [{ field: 'blocked', from: true, to: false }] },
      { type: 'relation.deleted', actorId: by, changes: [{ field: 'relation', from: removed, to: null }] },
      { type: 'task.updated', actorId: by, changes: [{ field: 'blocked', from: false, to: true }] },
      { type: 'relation.created', actorId: by, changes: [{ field: 'relation', from: null, to: made }] },
      { type: 'task.created', actorId: by, changes: expect.any(Array) },
    ]);
    // A relation that changes nothing shown (relates_to) makes no task.updated entry.
    await service.http
      .post(`/tasks/${blocked.id}/relations`)
      .set(as(alice))
      .send({ type: 'relates_to', taskId: blocker.id })
      .expect(201);
    expect((await entries(blocker.id))[0]).toEqual({
      type: 'relation.created',
      actorId: by,
      changes: [
        { field: 'relation', from: null, to: { taskId: blocked.id, type: 'relates_to', otherTaskId: blocker.id } },
      ],
    });
    expect((await entries(blocked.id)).map((entry) => entry.type).slice(0, 2)).toEqual([
      'relation.created',
      'task.updated',
    ]);
  });
});
