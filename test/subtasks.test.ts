import { v7 as uuidv7 } from 'uuid';
import { describe, expect, it } from 'vitest';
import { pageOf } from '../contract/common.js';
import { TaskSchema, type Task } from '../contract/tasks.js';
import { serviceForFile } from './support/app.js';
import { ofType, readAllChanges } from './support/events.js';
import { errorPaths, expectProblem } from './support/problems.js';
import { createTask, getTask } from './support/tasks.js';
import { userForFile, type TestUser } from './support/users.js';
import { createProject } from './support/projects.js';

// Subtasks: parentId on create, PUT and PATCH; the parent's counts kept by the writes, each change
// of them a new version with its task.updated; the hierarchy's rules (seen, same project or owner,
// at most 8 levels, no cycle), also under concurrent requests; GET /tasks?parentId=.
const service = serviceForFile();
const alice = userForFile(service);
const bob = userForFile(service);
const ROUNDS = 6;

const as = (user: { auth: string }) => ({ Authorization: user.auth });
const patch = (user: TestUser, taskId: string, body: object) =>
  service.http.patch(`/tasks/${taskId}`).set(as(user)).send(body);
const post = (user: TestUser, body: object) =>
  service.http
    .post('/tasks')
    .set(as(user))
    .send({ title: 'sub', ...body });

/** A chain of `levels` tasks, each under the one before; the top-level one first. */
async function chain(user: TestUser, levels: number, projectId: string | null = null): Promise<Task[]> {
  const tasks: Task[] = [];
  for (let level = 0; level < levels; level++)
    tasks.push(await createTask(service, user, { projectId, parentId: tasks.at(-1)?.id ?? null }));
  return tasks;
}

async function childrenOf(user: TestUser, parentId: string, query = ''): Promise<string[]> {
  const res = await service.http
    .get(`/tasks?parentId=${parentId}${query || '&limit=100'}`)
    .set(as(user))
    .expect(200);
  return pageOf(TaskSchema)
    .parse(res.body)
    .items.map((task) => task.id);
}

describe('a subtask', () => {
  it('is created under a parent, whose counts and version follow, each change with a task.updated', async () => {
    const parent = await createTask(service, alice);
    expect(parent).toMatchObject({ parentId: null, subtaskCount: 0, subtasksDone: 0, blocked: false });
    const start = (await readAllChanges(service, alice)).cursor;
    const child = await createTask(service, alice, { parentId: parent.id });
    const done = await createTask(service, alice, { parentId: parent.id, status: 'done' });
    expect(child.parentId).toBe(parent.id);
    const after = await getTask(service, alice, parent.id);
    expect(after).toMatchObject({ subtaskCount: 2, subtasksDone: 1, version: parent.version + 2 });
    const events = (await readAllChanges(service, alice, start)).events;
    expect(events.map((event) => event.type)).toEqual(['task.created', 'task.updated', 'task.created', 'task.updated']);
    expect(ofType(events, 'task.updated').at(-1)?.data.task).toEqual(after);

    // done ↔ not done, then a move to another parent and back to top level.
    await patch(alice, child.id, { status: 'done' }).expect(200);
    expect(await getTask(service, alice, parent.id)).toMatchObject({ subtasksDone: 2, version: after.version + 1 });
    await patch(alice, done.id, { status: 'todo' }).expect(200);
    const other = await createTask(service, alice);
    await patch(alice, child.id, { parentId: other.id }).expect(200);
    expect(await getTask(service, alice, parent.id)).toMatchObject({ subtaskCount: 1, subtasksDone: 0 });
    expect(await getTask(service, alice, other.id)).toMatchObject({ subtaskCount: 1, subtasksDone: 1, version: 2 });
    await patch(alice, child.id, { parentId: null }).expect(200);
    expect(await getTask(service, alice, other.id)).toMatchObject({ subtaskCount: 0, subtasksDone: 0, version: 3 });
    // A change that leaves the counts alone leaves the parent alone.
    await patch(alice, done.id, { title: 'renamed' }).expect(200);
    expect((await getTask(service, alice, parent.id)).version).toBe(after.version + 3);
  });

  it('is set by PUT when sent, and kept by a PUT that does not send it', async () => {
    const parent = await createTask(service, alice);
    const task = await createTask(service, alice);
    const body = { title: 'put', description: '', status: 'todo', priority: 'low', dueAt: null, assigneeId: null };
    const put = (extra: object) =>
      service.http
        .put(`/tasks/${task.id}`)
        .set(as(alice))
        .send({ ...body, ...extra });
    expect(TaskSchema.parse((await put({ parentId: parent.id }).expect(200)).body).parentId).toBe(parent.id);
    expect(TaskSchema.parse((await put({}).expect(200)).body).parentId).toBe(parent.id);
    expect(TaskSchema.parse((await put({ parentId: null }).expect(200)).body).parentId).toBeNull();
    expect((await getTask(service, alice, parent.id)).subtaskCount).toBe(0);
  });

  it('needs a parent the caller sees, in the same project or both personal of one owner (else 400 on body.parentId)', async () => {
    const project = (await createProject(service, alice)).id;
    const inProject = await createTask(service, alice, { projectId: project });
    const personal = await createTask(service, alice);
    const bobs = await createTask(service, bob);
    // Assigned to bob: he sees it, but it is alice's personal task, not his.
    const assigned = await createTask(service, alice, { assigneeId: bob.user.id });
    for (const [user, body] of [
      [alice, { parentId: inProject.id }],
      [alice, { parentId: personal.id, projectId: project }],
      [alice, { parentId: bobs.id }],
      [alice, { parentId: uuidv7() }],
      [bob, { parentId: assigned.id }],
    ] as const) {
      const res = await post(user, body);
      expectProblem(res, 400, 'validation_failed');
      expect(errorPaths(res.body)).toEqual(['body.parentId']);
    }
    expectProblem(await post(alice, { parentId: 'nope' }), 400, 'validation_failed');
    // Bob, the assignee of two of alice's tasks, puts one under the other.
    const shared = await createTask(service, alice, { assigneeId: bob.user.id });
    const res = await patch(bob, assigned.id, { parentId: shared.id }).expect(200);
    expect(TaskSchema.parse(res.body).parentId).toBe(shared.id);
    const mine = await createTask(service, alice);
    expect(errorPaths((await patch(alice, mine.id, { parentId: inProject.id })).body)).toEqual(['body.parentId']);
    expect((await getTask(service, alice, inProject.id)).subtaskCount).toBe(0);
  });

  it('is at most 8 levels deep, its own subtasks counted', async () => {
    const tasks = await chain(alice, 8);
    const ninth = await post(alice, { parentId: tasks[7]!.id });
    expectProblem(ninth, 400, 'validation_failed');
    expect(errorPaths(ninth.body)).toEqual(['body.parentId']);
    // A two-level subtree fits under level 6, not under level 7.
    const [top] = await chain(alice, 2);
    expect(errorPaths((await patch(alice, top!.id, { parentId: tasks[6]!.id })).body)).toEqual(['body.parentId']);
    await patch(alice, top!.id, { parentId: tasks[5]!.id }).expect(200);
  });

  it('never makes a cycle: not under itself or one of its subtasks', async () => {
    const [a, b, c] = await chain(alice, 3);
    for (const parent of [a!, b!, c!]) {
      const res = await patch(alice, a!.id, { parentId: parent.id });
      expectProblem(res, 400, 'validation_failed');
      expect(errorPaths(res.body)).toEqual(['body.parentId']);
    }
  });

  it('of two tasks each put under the other at once: one succeeds, never a cycle', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const [a, b] = [await createTask(service, alice), await createTask(service, alice)];
      const results = await Promise.all([
        patch(alice, a.id, { parentId: b.id }),
        patch(alice, b.id, { parentId: a.id }),
      ]);
      expect(results.map((res) => res.status).sort()).toEqual([200, 400]);
      const [afterA, afterB] = [await getTask(service, alice, a.id), await getTask(service, alice, b.id)];
      expect([afterA.parentId, afterB.parentId].filter((id) => id !== null)).toHaveLength(1);
      expect(afterA.subtaskCount + afterB.subtaskCount).toBe(1);
    }
  });

  it('of two chains joined at once past 8 levels: one succeeds', async () => {
    const project = (await createProject(service, alice)).id;
    for (let round = 0; round < ROUNDS; round++) {
      // 5 levels, and a 4-level chain to join: under the first chain's bottom (5 + 4 > 8) or its top
      // joined under a 4-level chain from below (4 + 5 > 8) — each alone fits 8 levels, both do not.
      const upper = await chain(alice, 4, project);
      const middle = await chain(alice, 3, project);
      const lower = await chain(alice, 2, project);
      const results = await Promise.all([
        patch(alice, middle[0]!.id, { parentId: upper[3]!.id }),
        patch(alice, lower[0]!.id, { parentId: middle[2]!.id }),
      ]);
      expect(results.map((res) => res.status).sort()).toEqual([200, 400]);
    }
  });

  it('is listed by GET /tasks?parentId= (direct subtasks only, those the caller sees)', async () => {
    const [top, child] = await chain(alice, 2);
    const sibling = await createTask(service, alice, { parentId: top!.id });
    await createTask(service, alice, { parentId: child!.id });
    expect((await childrenOf(alice, top!.id)).sort()).toEqual([child!.id, sibling.id].sort());
    expect(await childrenOf(alice, top!.id, '&sort=title&status=todo&limit=1')).toHaveLength(1);
    expect(await childrenOf(bob, top!.id)).toEqual([]);
    const own = await service.http.get(`/users/${alice.user.id}/tasks?parentId=${top!.id}`).set(as(alice)).expect(200);
    expect(pageOf(TaskSchema).parse(own.body).items).toHaveLength(2);
    expectProblem(await service.http.get('/tasks?parentId=x').set(as(alice)), 400, 'validation_failed');
  });

  it('becomes top-level when its parent is deleted, with a task.updated', async () => {
    const [top, child] = await chain(alice, 2);
    const grandParent = await createTask(service, alice);
    await patch(alice, top!.id, { parentId: grandParent.id }).expect(200);
    const start = (await readAllChanges(service, alice)).cursor;
    await service.http.delete(`/tasks/${top!.id}`).set(as(alice)).expect(204);
    const orphan = await getTask(service, alice, child!.id);
    expect(orphan).toMatchObject({ parentId: null, version: child!.version + 1 });
    expect(await getTask(service, alice, grandParent.id)).toMatchObject({ subtaskCount: 0 });
    const events = (await readAllChanges(service, alice, start)).events;
    expect(events.map((event) => event.type).sort()).toEqual(['task.deleted', 'task.updated', 'task.updated']);
    expect(ofType(events, 'task.updated').find((event) => event.data.task.id === child!.id)?.data.task).toEqual(orphan);
  });

  it('moved to another project loses its parent; its own subtasks stay and become top-level', async () => {
    const [from, to] = [(await createProject(service, alice)).id, (await createProject(service, alice)).id];
    const [top, middle, bottom] = await chain(alice, 3, from);
    const moved = TaskSchema.parse((await patch(alice, middle!.id, { projectId: to }).expect(200)).body);
    expect(moved).toMatchObject({ projectId: to, parentId: null, subtaskCount: 0 });
    expect(await getTask(service, alice, top!.id)).toMatchObject({ subtaskCount: 0 });
    expect(await getTask(service, alice, bottom!.id)).toMatchObject({ parentId: null, projectId: from });
    // Moved with a parent of the new project: it goes under it.
    const there = await createTask(service, alice, { projectId: to });
    const back = await patch(alice, bottom!.id, { projectId: to, parentId: there.id }).expect(200);
    expect(TaskSchema.parse(back.body).parentId).toBe(there.id);
  });

  it('changes are 401 without a token and 404 on a task the caller does not see', async () => {
    const task = await createTask(service, alice);
    expectProblem(await service.http.post('/tasks').send({ title: 't', parentId: task.id }), 401, 'unauthenticated');
    expectProblem(await patch(bob, task.id, { parentId: null }), 404, 'not_found');
  });
});
