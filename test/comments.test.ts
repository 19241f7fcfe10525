import { v7 as uuidv7 } from 'uuid';
import { describe, expect, it } from 'vitest';
import { CommentSchema, type Comment } from '../contract/comments.js';
import { pageOf } from '../contract/common.js';
import { ProjectSchema, type Project } from '../contract/projects.js';
import type { Task } from '../contract/tasks.js';
import { sql } from 'kysely';
import { rawQuery } from '../server/db/query.js';
import { serviceForFile } from './support/app.js';
import { ofType, readAllChanges } from './support/events.js';
import { errorPaths, expectProblem } from './support/problems.js';
import { createTask, getTask } from './support/tasks.js';
import { registerUser, userForFile, type TestUser } from './support/users.js';

// Comments on tasks over HTTP: who reads and writes them (as who reads and changes the task),
// commentCount and version kept exact under concurrent writes, TASK_MAX_COMMENTS (5 here).
const MAX = 5;
const service = serviceForFile({ TASK_MAX_COMMENTS: String(MAX) });
const alice = userForFile(service, { name: 'Alice' });
const bob = userForFile(service, { name: 'Bob' });
const viewer = userForFile(service, { name: 'Viewer' });
const editor = userForFile(service, { name: 'Editor' });
const projectAdmin = userForFile(service, { name: 'Project admin' });
const outsider = userForFile(service, { name: 'Outsider' });
const admin = userForFile(service, { admin: true });

const CommentPageSchema = pageOf(CommentSchema);
const as = (user: { auth: string }) => ({ Authorization: user.auth });

const post = (user: TestUser, taskId: string, body: object) =>
  service.http.post(`/tasks/${taskId}/comments`).set(as(user)).send(body);
async function comment(user: TestUser, taskId: string, body = 'a comment'): Promise<Comment> {
  return CommentSchema.parse((await post(user, taskId, { body }).expect(201)).body);
}

async function listAll(user: TestUser, taskId: string, limit = 100): Promise<Comment[]> {
  const items: Comment[] = [];
  let cursor: string | null = null;
  do {
    const res = await service.http
      .get(`/tasks/${taskId}/comments`)
      .query({ limit, ...(cursor ? { cursor } : {}) })
      .set(as(user))
      .expect(200);
    const page = CommentPageSchema.parse(res.body);
    if (page.nextCursor) expect(res.headers.link).toMatch(/rel="next"/);
    items.push(...page.items);
    cursor = page.nextCursor;
  } while (cursor);
  return items;
}

/** Alice's project with a viewer, an editor and a second admin. */
async function team(): Promise<Project> {
  const res = await service.http
    .post('/projects')
    .set(as(alice))
    .send({ name: `p-${uuidv7().slice(-6)}` });
  const project = ProjectSchema.parse(res.body);
  for (const [user, role] of [
    [viewer, 'viewer'],
    [editor, 'editor'],
    [projectAdmin, 'admin'],
  ] as const)
    await service.http
      .post(`/projects/${project.id}/members`)
      .set(as(alice))
      .send({ userId: user.user.id, role })
      .expect(201);
  return project;
}

describe('comments', () => {
  it('are written, read oldest first in pages, edited and deleted; each create and delete moves commentCount and version', async () => {
    const task = await createTask(service, alice);
    const first = await post(alice, task.id, { body: '**First**' }).expect(201);
    expect(first.headers.location).toBe(`/comments/${first.body.id}`);
    const created = CommentSchema.parse(first.body);
    expect(created).toMatchObject({ taskId: task.id, authorId: alice.user.id, body: '**First**', editedAt: null });
    expect(created.updatedAt).toBe(created.createdAt);
    const more = [await comment(alice, task.id, 'second'), await comment(alice, task.id, 'third')];
    expect(await getTask(service, alice, task.id)).toMatchObject({ commentCount: 3, version: task.version + 3 });
    expect((await listAll(alice, task.id, 2)).map((c) => c.id)).toEqual([created.id, ...more.map((c) => c.id)]);
    expect(
      (
        await service.http
          .get(first.headers.location ?? '')
          .set(as(alice))
          .expect(200)
      ).body,
    ).toEqual(created);

    const edited = CommentSchema.parse(
      (await service.http.patch(`/comments/${created.id}`).set(as(alice)).send({ body: 'First, edited' }).expect(200))
        .body,
    );
    expect(edited).toMatchObject({ id: created.id, body: 'First, edited', createdAt: created.createdAt });
    expect(edited.editedAt).not.toBeNull();
    expect(edited.updatedAt).toBe(edited.editedAt);
    // An edit does not change the task: it shows only how many comments it has.
    expect((await getTask(service, alice, task.id)).version).toBe(task.version + 3);

    await service.http.delete(`/comments/${created.id}`).set(as(alice)).expect(204);
    expectProblem(await service.http.get(`/comments/${created.id}`).set(as(alice)), 404, 'not_found');
    expect(await getTask(service, alice, task.id)).toMatchObject({ commentCount: 2, version: task.version + 4 });
  });

  it('refuse a bad body, an unknown field, a malformed id or cursor (400) and change nothing', async () => {
    const task = await createTask(service, alice);
    for (const body of [{}, { body: '' }, { body: '  \n ' }, { body: 'x'.repeat(10_001) }, { body: 'a\u0000b' }]) {
      const res = await post(alice, task.id, body);
      expectProblem(res, 400, 'validation_failed');
      expect([...new Set(errorPaths(res.body))]).toEqual(['body.body']);
    }
    expect(errorPaths((await post(alice, task.id, { body: 'x', authorId: bob.user.id })).body)).toEqual(['body']);
    expect((await post(alice, task.id, { body: 'x'.repeat(10_000) })).status).toBe(201);
    expectProblem(await service.http.get('/comments/nope').set(as(alice)), 400, 'validation_failed');
    expectProblem(await post(alice, 'nope', { body: 'x' }), 400, 'validation_failed');
    const bad = await service.http.get(`/tasks/${task.id}/comments?cursor=forged`).set(as(alice));
    expectProblem(bad, 400, 'validation_failed');
    const c = await comment(alice, task.id);
    expectProblem(
      await service.http.patch(`/comments/${c.id}`).set(as(alice)).send({ body: '' }),
      400,
      'validation_failed',
    );
    expect((await service.http.get(`/comments/${c.id}`).set(as(alice)).expect(200)).body.body).toBe('a comment');
    expect((await getTask(service, alice, task.id)).commentCount).toBe(2);
  });

  it('need a token (401)', async () => {
    const task = await createTask(service, alice);
    const c = await comment(alice, task.id);
    for (const res of [
      await service.http.get(`/tasks/${task.id}/comments`),
      await service.http.post(`/tasks/${task.id}/comments`).send({ body: 'x' }),
      await service.http.get(`/comments/${c.id}`),
      await service.http.patch(`/comments/${c.id}`).send({ body: 'x' }),
      await service.http.delete(`/comments/${c.id}`),
    ])
      expectProblem(res, 401, 'unauthenticated');
  });

  it("of another user's task do not exist for a stranger (404 for every method), nor for anyone once the task is deleted", async () => {
    const task = await createTask(service, alice);
    const c = await comment(alice, task.id);
    for (const res of [
      await service.http.get(`/tasks/${task.id}/comments`).set(as(bob)),
      await post(bob, task.id, { body: 'x' }),
      await service.http.get(`/comments/${c.id}`).set(as(bob)),
      await service.http.patch(`/comments/${c.id}`).set(as(bob)).send({ body: 'x' }),
      await service.http.delete(`/comments/${c.id}`).set(as(bob)),
      await service.http.get(`/comments/${uuidv7()}`).set(as(alice)),
    ])
      expectProblem(res, 404, 'not_found');
    await service.http.delete(`/tasks/${task.id}`).set(as(alice)).expect(204);
    expectProblem(await service.http.get(`/comments/${c.id}`).set(as(admin)), 404, 'not_found');
    const [left] = await service.ctx.db.sql.all(
      rawQuery(sql<{ n: number }>`SELECT count(*)::int AS n FROM comments WHERE task_id = ${task.id}::uuid`),
    );
    expect(left?.n).toBe(0);
  });

  it("are written by whoever may change the task, edited by their author only, deleted by the author, a project admin or a personal task's owner", async () => {
    const project = await team();
    const task = await createTask(service, alice, { projectId: project.id });
    expectProblem(await post(viewer, task.id, { body: 'x' }), 403, 'forbidden');
    expect((await service.http.get(`/tasks/${task.id}/comments`).set(as(viewer)).expect(200)).body.items).toEqual([]);
    const byEditor = await comment(editor, task.id);
    for (const user of [alice, projectAdmin, viewer, admin])
      expectProblem(
        await service.http.patch(`/comments/${byEditor.id}`).set(as(user)).send({ body: 'not mine' }),
        403,
        'forbidden',
      );
    const byAlice = await comment(alice, task.id);
    expectProblem(await service.http.delete(`/comments/${byAlice.id}`).set(as(editor)), 403, 'forbidden');
    expectProblem(await service.http.delete(`/comments/${byAlice.id}`).set(as(viewer)), 403, 'forbidden');
    await service.http.delete(`/comments/${byAlice.id}`).set(as(projectAdmin)).expect(204);
    await service.http.delete(`/comments/${byEditor.id}`).set(as(editor)).expect(204);
    expectProblem(await service.http.get(`/comments/${byEditor.id}`).set(as(outsider)), 404, 'not_found');

    // A personal task: its owner and assignee comment; the owner deletes any, the assignee their own.
    const personal = await createTask(service, alice, { assigneeId: bob.user.id });
    const byBob = await comment(bob, personal.id);
    const byOwner = await comment(alice, personal.id);
    expectProblem(await service.http.delete(`/comments/${byOwner.id}`).set(as(bob)), 403, 'forbidden');
    await service.http.delete(`/comments/${byBob.id}`).set(as(alice)).expect(204);
    await service.http.delete(`/comments/${byOwner.id}`).set(as(admin)).expect(204);
  });

  it('reach whoever sees the task as comment.* events beside the task.updated of its count, not outsiders', async () => {
    const project = await team();
    const task = await createTask(service, alice, { projectId: project.id });
    const [viewerStart, outsiderStart] = [
      (await readAllChanges(service, viewer)).cursor,
      (await readAllChanges(service, outsider)).cursor,
    ];
    const c = await comment(editor, task.id, 'hello');
    await service.http.patch(`/comments/${c.id}`).set(as(editor)).send({ body: 'hello again' }).expect(200);
    await service.http.delete(`/comments/${c.id}`).set(as(editor)).expect(204);
    const events = (await readAllChanges(service, viewer, viewerStart)).events;
    expect(events.map((event) => event.type)).toEqual([
      'comment.created',
      'task.updated',
      'comment.updated',
      'comment.deleted',
      'task.updated',
    ]);
    expect(ofType(events, 'comment.created')[0]?.data.comment).toMatchObject({ id: c.id, body: 'hello' });
    expect(ofType(events, 'comment.updated')[0]?.data.comment.body).toBe('hello again');
    expect(ofType(events, 'comment.deleted')[0]?.data).toEqual({ commentId: c.id, taskId: task.id });
    expect(ofType(events, 'task.updated').map((event) => event.data.previous)).toEqual([
      { commentCount: 0 },
      { commentCount: 1 },
    ]);
    expect((await readAllChanges(service, outsider, outsiderStart)).events).toEqual([]);
  });

  it('stay on a project task when their author is deleted, with authorId null', async () => {
    const project = await team();
    const leaver = await registerUser(service);
    await service.http
      .post(`/projects/${project.id}/members`)
      .set(as(alice))
      .send({ userId: leaver.user.id, role: 'editor' })
      .expect(201);
    const task = await createTask(service, alice, { projectId: project.id });
    const c = await comment(leaver, task.id);
    await service.http.delete(`/users/${leaver.user.id}`).set(as(leaver)).expect(204);
    const kept = CommentSchema.parse((await service.http.get(`/comments/${c.id}`).set(as(viewer)).expect(200)).body);
    expect(kept).toEqual({ ...c, authorId: null });
    expect((await getTask(service, viewer, task.id)).commentCount).toBe(1);
  });
});

describe('TASK_MAX_COMMENTS', () => {
  it('is a 409 quota_exceeded naming it, and a delete makes room again', async () => {
    const task = await createTask(service, alice);
    for (let n = 0; n < MAX; n++) await comment(alice, task.id);
    const refused = expectProblem(await post(alice, task.id, { body: 'one too many' }), 409, 'quota_exceeded');
    expect(refused.detail).toMatch(/TASK_MAX_COMMENTS/);
    expectProblem(await post(admin, task.id, { body: 'not even an admin' }), 409, 'quota_exceeded');
    expect(await getTask(service, alice, task.id)).toMatchObject({ commentCount: MAX, version: task.version + MAX });
    const [oldest] = await listAll(alice, task.id);
    await service.http.delete(`/comments/${oldest?.id}`).set(as(alice)).expect(204);
    await post(alice, task.id, { body: 'room again' }).expect(201);
  });
});

describe('concurrent comments', () => {
  it('at the limit: never more than TASK_MAX_COMMENTS, every refusal a 409', async () => {
    for (let round = 0; round < 4; round++) {
      const task = await createTask(service, alice);
      await comment(alice, task.id);
      const results = await Promise.all(Array.from({ length: 8 }, (_, i) => post(alice, task.id, { body: `c${i}` })));
      expect(results.map((res) => res.status).sort()).toEqual([201, 201, 201, 201, 409, 409, 409, 409]);
      expect((await listAll(alice, task.id)).length).toBe(MAX);
      expect((await getTask(service, alice, task.id)).commentCount).toBe(MAX);
    }
  });

  it('creates and deletes keep commentCount and version exact', async () => {
    const task = await createTask(service, alice, { assigneeId: bob.user.id });
    const doomed = [await comment(alice, task.id), await comment(bob, task.id)];
    const start: Task = await getTask(service, alice, task.id);
    const results = await Promise.all([
      post(alice, task.id, { body: 'a' }),
      post(bob, task.id, { body: 'b' }),
      post(alice, task.id, { body: 'c' }),
      ...doomed.map((c) => service.http.delete(`/comments/${c.id}`).set(as(alice))),
    ]);
    expect(results.map((res) => res.status)).toEqual([201, 201, 201, 204, 204]);
    const after = await getTask(service, alice, task.id);
    expect(after.commentCount).toBe((await listAll(alice, task.id)).length);
    expect(after).toMatchObject({ commentCount: 3, version: start.version + 5 });
  });
});
