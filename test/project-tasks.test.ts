import { v7 as uuidv7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { pageOf } from '../contract/common.js';
import type { Project } from '../contract/projects.js';
import { TaskSchema, type Task } from '../contract/tasks.js';
import type { Event } from '../contract/events.js';
import { listen, startService, type TestService } from './support/app.js';
import { ofType, readAllChanges } from './support/events.js';
import { openSse } from './support/sse.js';
import { errorPaths, expectProblem } from './support/problems.js';
import { createTask, getTask } from './support/tasks.js';
import { registerAdmin, registerUser, type TestUser } from './support/users.js';
import { addMember, createProject } from './support/projects.js';

// Tasks in projects: who sees and changes them (the project role, decided per request), moves
// between projects, assignees who must be members, GET /tasks?projectId=.
const TaskPageSchema = pageOf(TaskSchema);
const ROUNDS = 8;

let service: TestService;
let alice: TestUser; // owner of the tasks, admin of the project
let viewer: TestUser;
let editor: TestUser;
let projectAdmin: TestUser;
let outsider: TestUser;
let admin: TestUser;

beforeAll(async () => {
  service = await startService();
  [alice, viewer, editor, projectAdmin, outsider, admin] = await Promise.all([
    registerUser(service, { name: 'Alice' }),
    registerUser(service, { name: 'Viewer' }),
    registerUser(service, { name: 'Editor' }),
    registerUser(service, { name: 'Project admin' }),
    registerUser(service, { name: 'Outsider' }),
    registerAdmin(service),
  ]);
});
afterAll(() => service.close());

const as = (user: { auth: string }) => ({ Authorization: user.auth });

/** Alice's project with a viewer, an editor and a second admin; the outsider is in none. */
async function team(): Promise<Project> {
  const project = await createProject(service, alice);
  await addMember(service, alice, project.id, viewer, 'viewer').expect(201);
  await addMember(service, alice, project.id, editor, 'editor').expect(201);
  await addMember(service, alice, project.id, projectAdmin, 'admin').expect(201);
  return project;
}

async function listIds(user: TestUser, query = ''): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | null = null;
  do {
    const res = await service.http
      .get(`/tasks?limit=100${query}${cursor ? `&cursor=${cursor}` : ''}`)
      .set(as(user))
      .expect(200);
    const page = TaskPageSchema.parse(res.body);
    ids.push(...page.items.map((task) => task.id));
    cursor = page.nextCursor;
  } while (cursor);
  return ids;
}

const patch = (user: TestUser, taskId: string, body: object) =>
  service.http.patch(`/tasks/${taskId}`).set(as(user)).send(body);

describe('a task in a project', () => {
  it('carries its projectId, null for a personal task', async () => {
    const project = await team();
    const task = await createTask(service, alice, { projectId: project.id });
    expect(task.projectId).toBe(project.id);
    expect((await createTask(service, alice)).projectId).toBeNull();
    expect((await getTask(service, viewer, task.id)).projectId).toBe(project.id);
  });

  it('is created by an editor, not by a viewer or an outsider (400 on body.projectId)', async () => {
    const project = await team();
    expect((await createTask(service, editor, { projectId: project.id })).ownerId).toBe(editor.user.id);
    for (const user of [viewer, outsider]) {
      const res = await service.http.post('/tasks').set(as(user)).send({ title: 't', projectId: project.id });
      expectProblem(res, 400, 'validation_failed');
      expect(errorPaths(res.body)).toEqual(['body.projectId']);
    }
    const unknown = await service.http.post('/tasks').set(as(admin)).send({ title: 't', projectId: uuidv7() });
    expect(errorPaths(unknown.body)).toEqual(['body.projectId']);
    expect((await createTask(service, admin, { projectId: project.id })).projectId).toBe(project.id);
    expect(await listIds(viewer, `&projectId=${project.id}`)).toHaveLength(2);
  });

  it('is assigned only to a member of its project (400 on body.assigneeId)', async () => {
    const project = await team();
    const res = await service.http
      .post('/tasks')
      .set(as(alice))
      .send({ title: 't', projectId: project.id, assigneeId: outsider.user.id });
    expectProblem(res, 400, 'validation_failed');
    expect(errorPaths(res.body)).toEqual(['body.assigneeId']);
    const task = await createTask(service, alice, { projectId: project.id, assigneeId: viewer.user.id });
    const reassigned = await patch(editor, task.id, { assigneeId: outsider.user.id });
    expect(errorPaths(reassigned.body)).toEqual(['body.assigneeId']);
    // An editor reassigns a project's task, which on a personal task only its owner may do.
    expect((await patch(editor, task.id, { assigneeId: editor.user.id }).expect(200)).body.assigneeId).toBe(
      editor.user.id,
    );
  });

  it('is seen by every member and changed by editors and admins; a viewer gets 403, an outsider 404', async () => {
    const project = await team();
    const task = await createTask(service, alice, { projectId: project.id });
    for (const user of [viewer, editor, projectAdmin, admin]) expect(await listIds(user)).toContain(task.id);
    expect(await listIds(outsider)).not.toContain(task.id);
    expectProblem(await patch(viewer, task.id, { title: 'no' }), 403, 'forbidden');
    expectProblem(await patch(outsider, task.id, { title: 'no' }), 404, 'not_found');
    await patch(editor, task.id, { title: 'by the editor' }).expect(200);
    expect((await getTask(service, viewer, task.id)).title).toBe('by the editor');
  });

  it('follows the current membership: a removed member, even its owner, loses it at the next request', async () => {
    const project = await team();
    const task = await createTask(service, editor, { projectId: project.id, assigneeId: editor.user.id });
    await service.http.delete(`/projects/${project.id}/members/${editor.user.id}`).set(as(alice)).expect(204);
    expectProblem(await service.http.get(`/tasks/${task.id}`).set(as(editor)), 404, 'not_found');
    expect(await listIds(editor)).not.toContain(task.id);
    const own = await service.http.get(`/users/${editor.user.id}/tasks?limit=100`).set(as(editor)).expect(200);
    expect(TaskPageSchema.parse(own.body).items.map((t) => t.id)).not.toContain(task.id);
    // Demoted to viewer: reads it, no longer changes it.
    await addMember(service, alice, project.id, editor, 'viewer').expect(201);
    await getTask(service, editor, task.id);
    expectProblem(await patch(editor, task.id, { title: 'no' }), 403, 'forbidden');
  });

  it('loses its assignee when the assignee leaves the project, with a task.updated to the members', async () => {
    const project = await team();
    const task = await createTask(service, alice, { projectId: project.id, assigneeId: editor.user.id });
    const start = (await readAllChanges(service, viewer)).cursor;
    await service.http.delete(`/projects/${project.id}/members/${editor.user.id}`).set(as(editor)).expect(204);
    const after = await getTask(service, viewer, task.id);
    expect(after).toMatchObject({ assigneeId: null, version: task.version + 1 });
    const events = (await readAllChanges(service, viewer, start)).events;
    expect(events.map((event) => event.type)).toEqual(['project.member_removed', 'task.updated']);
    expect(ofType(events, 'task.updated')[0]?.data.task).toEqual(after);
  });

  it('races an assignment with the assignee’s removal: never left assigned to a non-member', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const project = await team();
      const task = await createTask(service, alice, { projectId: project.id });
      const [assigned] = await Promise.all([
        patch(editor, task.id, { assigneeId: viewer.user.id }),
        service.http.delete(`/projects/${project.id}/members/${viewer.user.id}`).set(as(alice)).expect(204),
      ]);
      expect([200, 400]).toContain(assigned.status);
      expect((await getTask(service, alice, task.id)).assigneeId).toBeNull();
    }
  });

  it('GET /tasks?projectId= lists one project, or personal tasks with none; an unseen project is empty', async () => {
    const [project, other] = [await team(), await createProject(service, alice)];
    const inProject = await createTask(service, alice, { projectId: project.id });
    const inOther = await createTask(service, alice, { projectId: other.id });
    const personal = await createTask(service, alice);
    expect(await listIds(alice, `&projectId=${project.id}`)).toEqual([inProject.id]);
    const none = await listIds(alice, '&projectId=none');
    expect(none).toContain(personal.id);
    expect(none).not.toContain(inProject.id);
    expect(await listIds(viewer, `&projectId=${other.id}`)).toEqual([]);
    expect(await listIds(admin, `&projectId=${other.id}`)).toEqual([inOther.id]);
    expectProblem(await service.http.get('/tasks?projectId=nope').set(as(alice)), 400, 'validation_failed');
  });

  it('pages a member of many projects through all their tasks, in order, each once', async () => {
    const projects = await Promise.all(Array.from({ length: 5 }, () => createProject(service, alice)));
    const member = await registerUser(service);
    const expected: string[] = [];
    for (const [i, project] of projects.entries()) {
      if (i < 4) await addMember(service, alice, project.id, member, i % 2 ? 'viewer' : 'editor').expect(201);
      for (let n = 0; n < 7; n++) {
        const task = await createTask(service, alice, { projectId: project.id, title: `t${i}-${n}` });
        if (i < 4) expected.push(task.id);
      }
    }
    expected.push((await createTask(service, member)).id);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const res = await service.http
        .get(`/tasks?limit=3&sort=title${cursor ? `&cursor=${cursor}` : ''}`)
        .set(as(member))
        .expect(200);
      const page = TaskPageSchema.parse(res.body);
      seen.push(...page.items.map((task) => task.id));
      cursor = page.nextCursor;
    } while (cursor);
    expect([...seen].sort()).toEqual([...expected].sort());
    expect(new Set(seen).size).toBe(seen.length);
  });
});

describe('moving a task', () => {
  it('between projects needs editor in both: 403 where the caller sees both, 400 for one they cannot see', async () => {
    const [from, to] = [await team(), await createProject(service, alice)];
    await addMember(service, alice, to.id, viewer, 'editor').expect(201);
    await addMember(service, alice, to.id, editor, 'viewer').expect(201);
    const task = await createTask(service, alice, { projectId: from.id });
    // Viewer in the source, editor in the target; editor in the source, viewer in the target.
    expectProblem(await patch(viewer, task.id, { projectId: to.id }), 403, 'forbidden');
    expectProblem(await patch(editor, task.id, { projectId: to.id }), 403, 'forbidden');
    const unseen = await patch(projectAdmin, task.id, { projectId: to.id });
    expectProblem(unseen, 400, 'validation_failed');
    expect(errorPaths(unseen.body)).toEqual(['body.projectId']);
    await addMember(service, alice, to.id, projectAdmin, 'editor').expect(201);
    const moved = TaskSchema.parse((await patch(projectAdmin, task.id, { projectId: to.id }).expect(200)).body);
    expect(moved.projectId).toBe(to.id);
    expect(moved.version).toBe(task.version + 1);
    expectProblem(await service.http.get(`/tasks/${task.id}`).set(as(outsider)), 404, 'not_found');
    expect(await listIds(viewer, `&projectId=${to.id}`)).toEqual([task.id]);
  });

  it("to personal: only its owner or an admin; it becomes the owner's personal task", async () => {
    const project = await team();
    const task = await createTask(service, editor, { projectId: project.id });
    expectProblem(await patch(projectAdmin, task.id, { projectId: null }), 403, 'forbidden');
    const personal = TaskSchema.parse((await patch(editor, task.id, { projectId: null }).expect(200)).body);
    expect(personal).toMatchObject({ projectId: null, ownerId: editor.user.id });
    expectProblem(await service.http.get(`/tasks/${task.id}`).set(as(projectAdmin)), 404, 'not_found');
    // Into a project again: by its owner (an editor there), not by an admin of the project.
    await patch(editor, task.id, { projectId: project.id }).expect(200);
    await patch(admin, task.id, { projectId: null }).expect(200);
  });

  it('into a project by an assignee of a personal task is refused: they never share the owner’s task', async () => {
    const project = await team();
    const task = await createTask(service, outsider, { assigneeId: editor.user.id });
    expectProblem(await patch(editor, task.id, { projectId: project.id }), 403, 'forbidden');
  });

  it('PUT leaves the project as it is', async () => {
    const project = await team();
    const task = await createTask(service, alice, { projectId: project.id });
    const body = { title: 'put', description: '', status: 'todo', priority: 'low', dueAt: null, assigneeId: null };
    const res = await service.http.put(`/tasks/${task.id}`).set(as(editor)).send(body).expect(200);
    expect(TaskSchema.parse(res.body).projectId).toBe(project.id);
    const withProject = await service.http
      .put(`/tasks/${task.id}`)
      .set(as(editor))
      .send({ ...body, projectId: null });
    expectProblem(withProject, 400, 'validation_failed');
  });

  it('races a removal of the mover: the move and the removal each take, or the move is refused', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const [from, to] = [await team(), await createProject(service, alice)];
      await addMember(service, alice, to.id, editor, 'editor').expect(201);
      const task = await createTask(service, alice, { projectId: from.id });
      const [moved] = await Promise.all([
        patch(editor, task.id, { projectId: to.id }),
        service.http.delete(`/projects/${to.id}/members/${editor.user.id}`).set(as(alice)).expect(204),
      ]);
      const after = await getTask(service, alice, task.id);
      if (moved.status === 200) expect(after.projectId).toBe(to.id);
      else {
        expect(moved.status).toBe(400);
        expect(after.projectId).toBe(from.id);
      }
    }
  });
});

/** Every operation on a task, each given a fresh task of its own to work on. */
interface Operation {
  name: string;
  run(user: TestUser, task: Task): Promise<{ status: number }>;
}

function upload(user: TestUser, taskId: string) {
  return service.http
    .post(`/tasks/${taskId}/attachments`)
    .set(as(user))
    .attach('file', Buffer.from('bytes'), { filename: 'a.txt', contentType: 'text/plain' });
}

async function commentOf(taskId: string): Promise<string> {
  const res = await service.http
    .post(`/tasks/${taskId}/comments`)
    .set(as(alice))
    .send({ body: 'by alice' })
    .expect(201);
  return z.object({ id: z.string() }).parse(res.body).id;
}

async function attachmentOf(taskId: string): Promise<string> {
  const res = await upload(alice, taskId).expect(201);
  return z.object({ id: z.string() }).parse(res.body).id;
}

const operations: Operation[] = [
  { name: 'GET /tasks/{id}', run: (user, task) => service.http.get(`/tasks/${task.id}`).set(as(user)) },
  {
    name: 'GET /tasks lists it',
    run: async (user, task) => ({ status: (await listIds(user)).includes(task.id) ? 200 : 404 }),
  },
  {
    name: 'PUT /tasks/{id}',
    run: (user, task) =>
      service.http
        .put(`/tasks/${task.id}`)
        .set(as(user))
        .send({ title: 'put', description: '', status: 'done', priority: 'low', dueAt: null, assigneeId: null }),
  },
  { name: 'PATCH /tasks/{id}', run: (user, task) => patch(user, task.id, { title: 'patched' }) },
  { name: 'DELETE /tasks/{id}', run: (user, task) => service.http.delete(`/tasks/${task.id}`).set(as(user)) },
  {
    name: 'GET /tasks/{id}/attachments',
    run: (user, task) => service.http.get(`/tasks/${task.id}/attachments`).set(as(user)),
  },
  { name: 'POST /tasks/{id}/attachments', run: (user, task) => upload(user, task.id) },
  {
    name: 'GET /attachments/{id}',
    run: async (user, task) => service.http.get(`/attachments/${await attachmentOf(task.id)}`).set(as(user)),
  },
  {
    name: 'DELETE /attachments/{id}',
    run: async (user, task) => service.http.delete(`/attachments/${await attachmentOf(task.id)}`).set(as(user)),
  },
  { name: 'GET /tasks/{id}/tags', run: (user, task) => service.http.get(`/tasks/${task.id}/tags`).set(as(user)) },
  {
    name: 'POST /tasks/{id}/tags/{tag_id}',
    run: async (user, task) => {
      // A tag that fits the task: its project's, or its owner's personal tag.
      const res = await service.http
        .post('/tags')
        .set(as(alice))
        .send({ name: `t-${uuidv7().slice(-8)}`, projectId: task.projectId })
        .expect(201);
      const tagId = z.object({ id: z.string() }).parse(res.body).id;
      return service.http.post(`/tasks/${task.id}/tags/${tagId}`).set(as(user));
    },
  },
  {
    name: 'GET /tasks/{id}/comments',
    run: (user, task) => service.http.get(`/tasks/${task.id}/comments`).set(as(user)),
  },
  {
    name: 'POST /tasks/{id}/comments',
    run: (user, task) => service.http.post(`/tasks/${task.id}/comments`).set(as(user)).send({ body: 'hello' }),
  },
  {
    name: 'GET /comments/{id}',
    run: async (user, task) => service.http.get(`/comments/${await commentOf(task.id)}`).set(as(user)),
  },
  {
    name: "PATCH /comments/{id} (another's)",
    run: async (user, task) =>
      service.http
        .patch(`/comments/${await commentOf(task.id)}`)
        .set(as(user))
        .send({ body: 'edited' }),
  },
  {
    name: 'PATCH /comments/{id} (their own)',
    run: async (user, task) => {
      const res = await service.http.post(`/tasks/${task.id}/comments`).set(as(user)).send({ body: 'mine' });
      if (res.status !== 201) return res;
      return service.http
        .patch(`/comments/${String(res.body.id)}`)
        .set(as(user))
        .send({ body: 'edited' });
    },
  },
  {
    name: "DELETE /comments/{id} (another's)",
    run: async (user, task) => service.http.delete(`/comments/${await commentOf(task.id)}`).set(as(user)),
  },
  {
    name: 'GET /tasks/{id}/activity',
    run: (user, task) => service.http.get(`/tasks/${task.id}/activity`).set(as(user)),
  },
  {
    name: 'DELETE /tasks/{id}/tags/{tag_id} (not on it)',
    run: async (user, task) => {
      const res = await service.http.delete(`/tasks/${task.id}/tags/${uuidv7()}`).set(as(user));
      // 404 names what is missing: the task (not seen) or the tag on it (the change was allowed).
      return { status: res.status === 404 && /tag on this task/.test(JSON.stringify(res.body)) ? 204 : res.status };
    },
  },
  {
    name: 'PATCH /tasks/{id} parentId',
    run: async (user, task) =>
      patch(user, task.id, { parentId: (await createTask(service, alice, { projectId: task.projectId })).id }),
  },
  {
    name: 'GET /tasks/{id}/relations',
    run: (user, task) => service.http.get(`/tasks/${task.id}/relations`).set(as(user)),
  },
  {
    name: 'POST /tasks/{id}/relations',
    run: async (user, task) => {
      // The other task beside it: of its project, or another personal task of its owner.
      const other = await createTask(service, alice, { projectId: task.projectId });
      return service.http.post(`/tasks/${task.id}/relations`).set(as(user)).send({ type: 'blocks', taskId: other.id });
    },
  },
  {
    name: 'DELETE /tasks/{id}/relations/{type}/{other_id}',
    run: async (user, task) => {
      const other = await createTask(service, alice, { projectId: task.projectId });
      await service.http
        .post(`/tasks/${other.id}/relations`)
        .set(as(alice))
        .send({ type: 'blocks', taskId: task.id })
        .expect(201);
      return service.http.delete(`/tasks/${task.id}/relations/blocked_by/${other.id}`).set(as(user));
    },
  },
];

type Role = 'non-member' | 'viewer' | 'editor' | 'project admin' | 'app admin';
const roles: Role[] = ['non-member', 'viewer', 'editor', 'project admin', 'app admin'];
const callerOf = (role: Role): TestUser =>
  ({ 'non-member': outsider, viewer, editor, 'project admin': projectAdmin, 'app admin': admin })[role]!;

// What each role may do, from the rules: another's object seen from outside is 404 for every
// method; an object the caller sees but may not change is 403. In a project, reads are every
// member's and writes (tasks, attachments, tags) an editor's or admin's. A personal task is its
// owner's (and assignee's): to every one of these roles but the app admin it does not exist.
const READ = { 'non-member': 404, viewer: 200, editor: 200, 'project admin': 200, 'app admin': 200 };
const WRITE = { 'non-member': 404, viewer: 403, editor: 200, 'project admin': 200, 'app admin': 200 };
const expectedInProject: Record<string, Record<Role, number>> = {
  'GET /tasks/{id}': READ,
  'GET /tasks lists it': READ,
  'PUT /tasks/{id}': WRITE,
  'PATCH /tasks/{id}': WRITE,
  'DELETE /tasks/{id}': { ...WRITE, editor: 204, 'project admin': 204, 'app admin': 204 },
  'GET /tasks/{id}/attachments': READ,
  'POST /tasks/{id}/attachments': { ...WRITE, editor: 201, 'project admin': 201, 'app admin': 201 },
  'GET /attachments/{id}': READ,
  'DELETE /attachments/{id}': { ...WRITE, editor: 204, 'project admin': 204, 'app admin': 204 },
  'GET /tasks/{id}/tags': READ,
  'POST /tasks/{id}/tags/{tag_id}': { ...WRITE, editor: 201, 'project admin': 201, 'app admin': 201 },
  'GET /tasks/{id}/comments': READ,
  'POST /tasks/{id}/comments': { ...WRITE, editor: 201, 'project admin': 201, 'app admin': 201 },
  'GET /comments/{id}': READ,
  // Only its author edits a comment, not even an admin; a viewer cannot write one to edit.
  "PATCH /comments/{id} (another's)": { ...WRITE, editor: 403, 'project admin': 403, 'app admin': 403 },
  'PATCH /comments/{id} (their own)': { ...WRITE, viewer: 403 },
  // Another's comment: a project admin (or an app admin) deletes it, an editor may not.
  "DELETE /comments/{id} (another's)": { ...WRITE, editor: 403, 'project admin': 204, 'app admin': 204 },
  'GET /tasks/{id}/activity': READ,
  'DELETE /tasks/{id}/tags/{tag_id} (not on it)': { ...WRITE, editor: 204, 'project admin': 204, 'app admin': 204 },
  'PATCH /tasks/{id} parentId': WRITE,
  'GET /tasks/{id}/relations': READ,
  'POST /tasks/{id}/relations': { ...WRITE, editor: 201, 'project admin': 201, 'app admin': 201 },
  'DELETE /tasks/{id}/relations/{type}/{other_id}': { ...WRITE, editor: 204, 'project admin': 204, 'app admin': 204 },
};
const expectedPersonal = Object.fromEntries(
  Object.entries(expectedInProject).map(([name, statuses]) => [
    name,
    { ...statuses, viewer: 404, editor: 404, 'project admin': 404 },
  ]),
);

describe('every task operation × role', () => {
  let project: Project;
  beforeAll(async () => {
    project = await team();
  });

  // Every operation for every role, each on a fresh task: a few hundred requests one after another,
  // 11 to 21 s beside the rest of the suite on two cores, and past the default 30 s at load 12.
  for (const kind of ['a project task', 'a personal task'] as const) {
    it(`on ${kind}`, { timeout: 120_000 }, async () => {
      const table = kind === 'a project task' ? expectedInProject : expectedPersonal;
      const found: Record<string, Record<Role, number>> = {};
      for (const operation of operations) {
        found[operation.name] = { 'non-member': 0, viewer: 0, editor: 0, 'project admin': 0, 'app admin': 0 };
        for (const role of roles) {
          const task = await createTask(service, alice, kind === 'a project task' ? { projectId: project.id } : {});
          const res = await operation.run(callerOf(role), task);
          found[operation.name]![role] = res.status;
        }
      }
      expect(found).toEqual(table);
    });
  }
});

describe('project tags', () => {
  const createTag = (user: TestUser, body: object) => service.http.post('/tags').set(as(user)).send(body);
  const tagId = (res: { body: unknown }) => z.object({ id: z.string() }).parse(res.body).id;
  const link = (user: TestUser, taskId: string, id: string) =>
    service.http.post(`/tasks/${taskId}/tags/${id}`).set(as(user));

  it('are created by editors, unique by name within the project ignoring case, seen by members', async () => {
    const [project, other] = [await team(), await team()];
    const created = await createTag(editor, { name: 'Urgent', projectId: project.id }).expect(201);
    expect(created.body).toMatchObject({ projectId: project.id, ownerId: editor.user.id, name: 'Urgent' });
    expectProblem(await createTag(alice, { name: 'urgent', projectId: project.id }), 409, 'tag_name_taken');
    // Another project, and a personal tag, may use the name.
    await createTag(alice, { name: 'URGENT', projectId: other.id }).expect(201);
    await createTag(editor, { name: 'urgent' }).expect(201);
    for (const user of [viewer, outsider]) {
      const res = await createTag(user, { name: 'x', projectId: project.id });
      expectProblem(res, 400, 'validation_failed');
      expect(errorPaths(res.body)).toEqual(['body.projectId']);
    }
    const id = tagId(created);
    await service.http.get(`/tags/${id}`).set(as(viewer)).expect(200);
    expectProblem(await service.http.get(`/tags/${id}`).set(as(outsider)), 404, 'not_found');
    const listed = await service.http.get(`/tags?projectId=${project.id}`).set(as(viewer)).expect(200);
    expect(listed.body.items.map((tag: { id: string }) => tag.id)).toEqual([id]);
    const none = await service.http.get(`/tags?projectId=${project.id}`).set(as(outsider)).expect(200);
    expect(none.body.items).toEqual([]);
    // A viewer reads it but does not change it; an editor does.
    expectProblem(await service.http.patch(`/tags/${id}`).set(as(viewer)).send({ color: '#000000' }), 403, 'forbidden');
    expectProblem(await service.http.delete(`/tags/${id}`).set(as(viewer)), 403, 'forbidden');
    await service.http.patch(`/tags/${id}`).set(as(projectAdmin)).send({ color: '#000000' }).expect(200);
  });

  it("GET /tags pages through a member's personal and project tags together, oldest first", async () => {
    const member = await registerUser(service);
    const [one, two] = [await team(), await team()];
    await addMember(service, alice, one.id, member, 'viewer').expect(201);
    await addMember(service, alice, two.id, member, 'editor').expect(201);
    const ids: string[] = [];
    for (const [i, projectId] of [null, one.id, two.id, null, two.id, one.id, null].entries())
      ids.push(tagId(await createTag(projectId === one.id ? alice : member, { name: `n${i}`, projectId }).expect(201)));
    await createTag(alice, { name: 'not theirs' }).expect(201);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const res = await service.http
        .get(`/tags?limit=2${cursor ? `&cursor=${cursor}` : ''}`)
        .set(as(member))
        .expect(200);
      const page = z
        .object({ items: z.array(z.object({ id: z.string() })), nextCursor: z.string().nullable() })
        .parse(res.body);
      seen.push(...page.items.map((tag) => tag.id));
      cursor = page.nextCursor;
    } while (cursor);
    expect(seen).toEqual(ids);
  });

  it('of one name created at once by several editors: one 201, the others 409', async () => {
    const project = await team();
    const results = await Promise.all(
      [alice, editor, projectAdmin, editor].map((user, i) =>
        createTag(user, { name: i % 2 ? 'Race' : 'race', projectId: project.id }),
      ),
    );
    expect(results.map((res) => res.status).sort()).toEqual([201, 409, 409, 409]);
  });

  it("go only on their project's tasks; a personal tag only on its owner's personal tasks (else 400)", async () => {
    const [project, other] = [await team(), await team()];
    const projectTag = tagId(await createTag(alice, { name: 'p', projectId: project.id }).expect(201));
    const otherTag = tagId(await createTag(alice, { name: 'o', projectId: other.id }).expect(201));
    const personalTag = tagId(await createTag(alice, { name: 'mine' }).expect(201));
    const withTags = (tagIds: string[], projectId: string | null) =>
      service.http.post('/tasks').set(as(alice)).send({ title: 't', projectId, tagIds });
    for (const [tags, projectId] of [
      [[otherTag], project.id],
      [[personalTag], project.id],
      [[projectTag], null],
    ] as const) {
      const res = await withTags([...tags], projectId);
      expectProblem(res, 400, 'validation_failed');
      expect(errorPaths(res.body)).toEqual(['body.tagIds']);
    }
    const task = TaskSchema.parse((await withTags([projectTag], project.id).expect(201)).body);
    expect(task.tags.map((tag) => tag.id)).toEqual([projectTag]);
    // Linking: an editor links the project's tag; a visible tag of another kind is 400.
    const bare = await createTask(service, alice, { projectId: project.id });
    await link(editor, bare.id, projectTag).expect(201);
    expectProblem(await link(viewer, bare.id, projectTag), 403, 'forbidden');
    const unfit = await link(alice, bare.id, otherTag);
    expectProblem(unfit, 400, 'validation_failed');
    expectProblem(await link(alice, bare.id, personalTag), 400, 'validation_failed');
    // Moving a task drops the tags that do not fit its new project.
    const moved = TaskSchema.parse((await patch(alice, task.id, { projectId: other.id }).expect(200)).body);
    expect(moved.tags).toEqual([]);
    expect((await getTask(service, alice, task.id)).tags).toEqual([]);
  });
});

describe("a project's events", () => {
  const typesAbout = (events: Event[], taskId: string) =>
    events
      .filter((event) => JSON.stringify(event.data).includes(taskId) || event.type.startsWith('project.'))
      .map((event) => event.type);

  it('reach every member at the time of reading; a removed member reads their removal last, nothing before it', async () => {
    const start = (await readAllChanges(service, editor)).cursor;
    const outsiderStart = (await readAllChanges(service, outsider)).cursor;
    const project = await team();
    const task = await createTask(service, alice, { projectId: project.id });
    await patch(alice, task.id, { title: 'changed' }).expect(200);
    await upload(alice, task.id).expect(201);
    const seen = await readAllChanges(service, editor, start);
    expect(typesAbout(seen.events, task.id)).toEqual([
      'project.created',
      'project.member_added',
      'project.member_added',
      'project.member_added',
      'task.created',
      'task.updated',
      'attachment.created',
      'task.updated',
    ]);
    // Members see each other: the actor is shown.
    expect(seen.events.find((event) => event.type === 'task.created')?.actorId).toBe(alice.user.id);
    expect((await readAllChanges(service, outsider, outsiderStart)).events).toEqual([]);

    await service.http.delete(`/projects/${project.id}/members/${editor.user.id}`).set(as(alice)).expect(204);
    await patch(alice, task.id, { title: 'after' }).expect(200);
    const after = await readAllChanges(service, editor, seen.cursor);
    expect(after.events.map((event) => event.type)).toEqual(['project.member_removed']);
    // From the start again: the project's past is gone with the membership, but for the removal.
    expect(typesAbout((await readAllChanges(service, editor, start)).events, task.id)).toEqual([
      'project.member_removed',
    ]);
  });

  it("an editor's deletions of attachments, tag links and the task reach the members, not outsiders", async () => {
    const project = await team();
    const task = await createTask(service, alice, { projectId: project.id });
    const attachmentId = z.object({ id: z.string() }).parse((await upload(alice, task.id).expect(201)).body).id;
    const start = (await readAllChanges(service, viewer)).cursor;
    const outsiderStart = (await readAllChanges(service, outsider)).cursor;
    await service.http.delete(`/attachments/${attachmentId}`).set(as(editor)).expect(204);
    await service.http.delete(`/tasks/${task.id}`).set(as(editor)).expect(204);
    const events = (await readAllChanges(service, viewer, start)).events;
    expect(events.map((event) => event.type)).toEqual(['attachment.deleted', 'task.updated', 'task.deleted']);
    expect(events.every((event) => event.actorId === editor.user.id)).toBe(true);
    expect((await readAllChanges(service, outsider, outsiderStart)).events).toEqual([]);
  });

  it("a move reaches the former project's members too, then nothing more of the task", async () => {
    const [from, to] = [await team(), await createProject(service, alice)];
    const start = (await readAllChanges(service, viewer)).cursor;
    const task = await createTask(service, alice, { projectId: from.id });
    await patch(alice, task.id, { projectId: to.id }).expect(200);
    await patch(alice, task.id, { title: 'elsewhere' }).expect(200);
    const events = (await readAllChanges(service, viewer, start)).events.filter((event) =>
      JSON.stringify(event.data).includes(task.id),
    );
    expect(events.map((event) => event.type)).toEqual(['task.created', 'task.updated']);
    expect(ofType(events, 'task.updated')[0]?.data.task.projectId).toBe(to.id);
  });

  it('a removed member’s open stream receives their removal, then nothing more of the project', async () => {
    const listening = await listen(service);
    try {
      const project = await team();
      const sse = await openSse(listening.baseUrl, as(editor));
      const task = await createTask(service, alice, { projectId: project.id });
      await sse.until((frames) => frames.some((frame) => frame.event === 'task.created'));
      await service.http.delete(`/projects/${project.id}/members/${editor.user.id}`).set(as(alice)).expect(204);
      await patch(alice, task.id, { title: 'unseen' }).expect(200);
      // A later event of the editor's own, to know the stream has read past the update.
      const mine = await createTask(service, editor);
      await sse.until((frames) => frames.some((frame) => frame.data?.includes(mine.id) === true));
      expect(sse.events().map((event) => event.type)).toEqual([
        'task.created',
        'project.member_removed',
        'task.created',
      ]);
      sse.close();
    } finally {
      await listening.close();
    }
  });
});

describe('deleting a user', () => {
  it("hands their project tasks and tags to the project's longest-standing admin, with task.updated", async () => {
    const project = await team();
    const leaver = await registerUser(service);
    await addMember(service, alice, project.id, leaver, 'editor').expect(201);
    const task = await createTask(service, leaver, { projectId: project.id, assigneeId: leaver.user.id });
    const tagRes = await service.http.post('/tags').set(as(leaver)).send({ name: 'kept', projectId: project.id });
    const tag = z.object({ id: z.string() }).parse(tagRes.body);
    const personal = await createTask(service, leaver);
    const start = (await readAllChanges(service, viewer)).cursor;
    await service.http.delete(`/users/${leaver.user.id}`).set(as(leaver)).expect(204);

    const kept = await getTask(service, viewer, task.id);
    expect(kept).toMatchObject({ ownerId: alice.user.id, assigneeId: null, projectId: project.id });
    expect(kept.version).toBeGreaterThan(task.version);
    const keptTag = await service.http.get(`/tags/${tag.id}`).set(as(viewer)).expect(200);
    expect(keptTag.body).toMatchObject({ ownerId: alice.user.id, projectId: project.id });
    expectProblem(await service.http.get(`/tasks/${personal.id}`).set(as(admin)), 404, 'not_found');
    const events = (await readAllChanges(service, viewer, start)).events;
    const updates = ofType(events, 'task.updated').filter((event) => event.data.task.id === task.id);
    expect(updates.at(-1)?.data.task).toEqual(kept);
    const tagUpdates = ofType(events, 'tag.updated').filter((event) => event.data.tag.id === tag.id);
    expect(tagUpdates.at(-1)?.data.tag).toEqual(keptTag.body);
  });

  it('hands them to the member who inherits the project when they were its last admin', async () => {
    const leaver = await registerUser(service);
    const project = await createProject(service, leaver);
    await addMember(service, leaver, project.id, viewer, 'viewer').expect(201);
    await addMember(service, leaver, project.id, editor, 'editor').expect(201);
    const task = await createTask(service, leaver, { projectId: project.id });
    await service.http.delete(`/users/${leaver.user.id}`).set(as(leaver)).expect(204);
    expect((await getTask(service, viewer, task.id)).ownerId).toBe(viewer.user.id);
    await patch(viewer, task.id, { title: 'the new admin changes it' }).expect(200);
  });
});
