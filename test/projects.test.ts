import { v7 as uuidv7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pageOf } from '../contract/common.js';
import { MemberSchema, ProjectSchema, type Project } from '../contract/projects.js';
import { tables } from '../server/db/query.js';
import { startService, type TestService } from './support/app.js';
import { readAllChanges } from './support/events.js';
import { createPersonalToken } from './support/personal-tokens.js';
import { errorPaths, expectProblem } from './support/problems.js';
import { registerAdmin, registerUser, type TestUser } from './support/users.js';
import { addMember, createProject } from './support/projects.js';

const ProjectPageSchema = pageOf(ProjectSchema);

let service: TestService;
let alice: TestUser;
let bob: TestUser;
let carol: TestUser;
let admin: TestUser;

beforeAll(async () => {
  service = await startService({ USER_MAX_PROJECTS: '4' });
  [alice, bob, carol, admin] = await Promise.all([
    registerUser(service, { name: 'Alice' }),
    registerUser(service, { name: 'Bob' }),
    registerUser(service, { name: 'Carol' }),
    registerAdmin(service),
  ]);
});
afterAll(() => service.close());

const as = (user: { auth: string }) => ({ Authorization: user.auth });

/** A project of Alice's with Bob as `bobRole` (and Carol outside it). */
async function sharedProject(bobRole: 'viewer' | 'editor' | 'admin'): Promise<Project> {
  const project = await createProject(service, alice);
  await addMember(service, alice, project.id, bob, bobRole).expect(201);
  return project;
}

/** Removes every project of `user`, so quota tests start from none. */
async function deleteProjectsOf(user: TestUser): Promise<void> {
  const page = ProjectPageSchema.parse((await service.http.get('/projects?limit=100').set(as(user)).expect(200)).body);
  for (const project of page.items) {
    if (project.role === 'admin') await service.http.delete(`/projects/${project.id}`).set(as(user)).expect(204);
  }
}

describe('POST /projects', () => {
  it('creates a project with the caller as its only admin, with Location and ETag', async () => {
    const res = await service.http
      .post('/projects')
      .set(as(alice))
      .send({ name: '  Launch  ', description: 'Everything for the launch' })
      .expect(201);
    const project = ProjectSchema.parse(res.body);
    expect(project).toMatchObject({
      name: 'Launch',
      description: 'Everything for the launch',
      role: 'admin',
      memberCount: 1,
      version: 1,
    });
    expect(res.headers.location).toBe(`/projects/${project.id}`);
    expect(res.headers.etag).toBe('"1"');
    const members = pageOf(MemberSchema).parse(
      (await service.http.get(`/projects/${project.id}/members`).set(as(alice)).expect(200)).body,
    );
    expect(members.items).toEqual([
      { userId: alice.user.id, name: 'Alice', email: alice.email, role: 'admin', addedAt: project.createdAt },
    ]);
    await deleteProjectsOf(alice);
  });

  it('rejects a bad body with every issue, and changes nothing', async () => {
    const res = await service.http
      .post('/projects')
      .set(as(alice))
      .send({ name: '   ', description: 'x'.repeat(10_001), id: uuidv7() });
    expectProblem(res, 400, 'validation_failed');
    expect(errorPaths(res.body).sort()).toEqual(['body', 'body.description', 'body.name']);
    const page = ProjectPageSchema.parse((await service.http.get('/projects').set(as(alice)).expect(200)).body);
    expect(page.items).toEqual([]);
  });

  it('needs a token (401)', async () => {
    expectProblem(await service.http.post('/projects').send({ name: 'x' }), 401, 'unauthenticated');
    expectProblem(await service.http.get('/projects'), 401, 'unauthenticated');
  });

  it('holds a user to USER_MAX_PROJECTS, concurrent creates included (409 quota_exceeded); admins are exempt', async () => {
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        service.http
          .post('/projects')
          .set(as(carol))
          .send({ name: `q${i}` }),
      ),
    );
    expect(answers.filter((res) => res.status === 201)).toHaveLength(4);
    for (const res of answers.filter((r) => r.status !== 201)) expectProblem(res, 409, 'quota_exceeded');
    // Deleting one makes room again.
    const page = ProjectPageSchema.parse((await service.http.get('/projects').set(as(carol)).expect(200)).body);
    const [first] = page.items;
    if (!first) throw new Error('no project');
    await service.http.delete(`/projects/${first.id}`).set(as(carol)).expect(204);
    await createProject(service, carol);
    expectProblem(await service.http.post('/projects').set(as(carol)).send({ name: 'over' }), 409, 'quota_exceeded');
    for (let i = 0; i < 5; i++) await createProject(service, admin);
    await deleteProjectsOf(carol);
    await deleteProjectsOf(admin);
  });
});

describe('GET /projects and GET /projects/{id}', () => {
  it("lists the caller's projects oldest first, paginated, with q; admins see all and filter by userId", async () => {
    const a1 = await createProject(service, alice, { name: 'Garden plan' });
    const a2 = await createProject(service, alice, { name: 'Kitchen' });
    const b1 = await createProject(service, bob, { name: 'Bob garden' });
    await addMember(service, bob, b1.id, alice, 'viewer').expect(201);
    const first = await service.http.get('/projects?limit=2').set(as(alice)).expect(200);
    const page1 = ProjectPageSchema.parse(first.body);
    expect(page1.items.map((p) => p.id)).toEqual([a1.id, a2.id]);
    expect(first.headers.link).toMatch(/rel="next"/);
    const page2 = ProjectPageSchema.parse(
      (
        await service.http
          .get(`/projects?limit=2&cursor=${page1.nextCursor ?? ''}`)
          .set(as(alice))
          .expect(200)
      ).body,
    );
    expect(page2.items.map((p) => [p.id, p.role, p.memberCount])).toEqual([[b1.id, 'viewer', 2]]);
    expect(page2.nextCursor).toBeNull();

    const garden = ProjectPageSchema.parse(
      (await service.http.get('/projects?q=GARDEN').set(as(alice)).expect(200)).body,
    );
    expect(garden.items.map((p) => p.id)).toEqual([a1.id, b1.id]);

    // Bob naming Alice sees only the projects both belong to.
    const shared = ProjectPageSchema.parse(
      (await service.http.get(`/projects?userId=${alice.user.id}`).set(as(bob)).expect(200)).body,
    );
    expect(shared.items.map((p) => p.id)).toEqual([b1.id]);

    const all = ProjectPageSchema.parse(
      (await service.http.get('/projects?limit=100').set(as(admin)).expect(200)).body,
    );
    expect(all.items.map((p) => p.id)).toEqual([a1.id, a2.id, b1.id]);
    expect(all.items.every((p) => p.role === null)).toBe(true);
    const bobs = ProjectPageSchema.parse(
      (await service.http.get(`/projects?userId=${bob.user.id}`).set(as(admin)).expect(200)).body,
    );
    expect(bobs.items.map((p) => p.id)).toEqual([b1.id]);

    expectProblem(await service.http.get('/projects?cursor=forged').set(as(alice)), 400, 'validation_failed');
    expectProblem(await service.http.get('/projects?limit=0&userId=x').set(as(alice)), 400, 'validation_failed');
    await deleteProjectsOf(alice);
    await deleteProjectsOf(bob);
  });

  it('answers one project with its ETag to members and admins, 404 to outsiders and for unknown ids', async () => {
    const project = await sharedProject('viewer');
    const res = await service.http.get(`/projects/${project.id}`).set(as(bob)).expect(200);
    expect(ProjectSchema.parse(res.body)).toMatchObject({ id: project.id, role: 'viewer', memberCount: 2 });
    expect(res.headers.etag).toBe('"1"');
    const seenByAdmin = ProjectSchema.parse(
      (await service.http.get(`/projects/${project.id}`).set(as(admin)).expect(200)).body,
    );
    expect(seenByAdmin.role).toBeNull();
    expectProblem(await service.http.get(`/projects/${project.id}`).set(as(carol)), 404, 'not_found');
    expectProblem(await service.http.get(`/projects/${uuidv7()}`).set(as(alice)), 404, 'not_found');
    expectProblem(await service.http.get('/projects/not-an-id').set(as(alice)), 400, 'validation_failed');
    await deleteProjectsOf(alice);
  });
});

describe('PATCH /projects/{id}', () => {
  it('lets a project admin rename it, honouring If-Match; other members 403, outsiders 404', async () => {
    const project = await sharedProject('editor');
    const path = `/projects/${project.id}`;
    const renamed = await service.http.patch(path).set(as(alice)).set('If-Match', '"1"').send({ name: 'Renamed' });
    expect(renamed.status).toBe(200);
    expect(ProjectSchema.parse(renamed.body)).toMatchObject({ name: 'Renamed', version: 2, description: '' });
    expect(renamed.headers.etag).toBe('"2"');
    const stale = await service.http.patch(path).set(as(alice)).set('If-Match', '"1"').send({ name: 'Again' });
    expectProblem(stale, 412, 'precondition_failed');
    expect(stale.headers.etag).toBe('"2"');
    // Authorization before the precondition: an editor gets 403, an outsider 404.
    expectProblem(
      await service.http.patch(path).set(as(bob)).set('If-Match', '"1"').send({ name: 'x' }),
      403,
      'forbidden',
    );
    expectProblem(await service.http.patch(path).set(as(carol)).send({ name: 'x' }), 404, 'not_found');
    expectProblem(await service.http.patch(path).set(as(alice)).send({ name: '' }), 400, 'validation_failed');
    expectProblem(
      await service.http.patch(path).set(as(alice)).set('If-Match', '2').send({}),
      400,
      'validation_failed',
    );
    expectProblem(await service.http.patch(path).send({ name: 'x' }), 401, 'unauthenticated');
    // Unchanged: no new version. An admin may change any project.
    const same = ProjectSchema.parse((await service.http.patch(path).set(as(alice)).send({ name: 'Renamed' })).body);
    expect(same.version).toBe(2);
    const byAdmin = ProjectSchema.parse(
      (await service.http.patch(path).set(as(admin)).send({ description: 'by admin' }).expect(200)).body,
    );
    expect(byAdmin).toMatchObject({ name: 'Renamed', description: 'by admin', version: 3, role: null });
    await deleteProjectsOf(alice);
  });

  it('keeps both of two concurrent changes of different fields', async () => {
    const project = await createProject(service, alice);
    const path = `/projects/${project.id}`;
    await Promise.all([
      service.http.patch(path).set(as(alice)).send({ name: 'Both' }).expect(200),
      service.http.patch(path).set(as(alice)).send({ description: 'kept' }).expect(200),
    ]);
    const after = ProjectSchema.parse((await service.http.get(path).set(as(alice)).expect(200)).body);
    expect(after).toMatchObject({ name: 'Both', description: 'kept', version: 3 });
    await deleteProjectsOf(alice);
  });
});

describe('DELETE /projects/{id}', () => {
  it('lets a project admin delete it (If-Match honoured); others 403 or 404; concurrent deletes: one 204', async () => {
    const project = await sharedProject('editor');
    const path = `/projects/${project.id}`;
    expectProblem(await service.http.delete(path).set(as(bob)), 403, 'forbidden');
    expectProblem(await service.http.delete(path).set(as(carol)), 404, 'not_found');
    expectProblem(await service.http.delete(path).set(as(alice)).set('If-Match', '"7"'), 412, 'precondition_failed');
    const answers = await Promise.all([1, 2, 3].map(() => service.http.delete(path).set(as(alice))));
    expect(answers.map((res) => res.status).sort()).toEqual([204, 404, 404]);
    expectProblem(await service.http.get(path).set(as(alice)), 404, 'not_found');
    expectProblem(await service.http.get(path).set(as(bob)), 404, 'not_found');
  });
});

/** The keys of every object the attachment storage holds. */
async function storedKeys(): Promise<string[]> {
  const keys: string[] = [];
  for await (const entry of service.ctx.attachmentStorage.list()) keys.push(entry.key);
  return keys.sort();
}

/**
 * A task of `user` with one attachment, and a tag of theirs, both moved into `projectId` in the
 * database (creating them in a project through the API comes with tasks in projects).
 */
async function projectTaskAndTag(user: TestUser, projectId: string): Promise<{ taskId: string; tagId: string }> {
  const task = (await service.http.post('/tasks').set(as(user)).send({ title: 'In the project' }).expect(201)).body as {
    id: string;
  };
  await service.http
    .post(`/tasks/${task.id}/attachments`)
    .set(as(user))
    .attach('file', Buffer.from('project notes'), { filename: 'notes.txt', contentType: 'text/plain' })
    .expect(201);
  const tag = (
    await service.http
      .post('/tags')
      .set(as(user))
      .send({ name: `t-${uuidv7().slice(-6)}` })
      .expect(201)
  ).body as { id: string };
  await service.ctx.db.sql.write(tables.updateTable('tasks').set({ project_id: projectId }).where('id', '=', task.id));
  await service.ctx.db.sql.write(tables.updateTable('tags').set({ project_id: projectId }).where('id', '=', tag.id));
  return { taskId: task.id, tagId: tag.id };
}

describe('deleting a project with its work', () => {
  it("deletes its tasks (attachments' bytes included), tags and memberships as one change: one project.deleted", async () => {
    const project = await sharedProject('editor');
    const before = await storedKeys();
    const { taskId, tagId } = await projectTaskAndTag(alice, project.id);
    const withAttachment = await storedKeys();
    expect(withAttachment).toHaveLength(before.length + 1);
    const from = (await readAllChanges(service, admin)).cursor;
    const fromBob = (await readAllChanges(service, bob)).cursor;
    await service.http.delete(`/projects/${project.id}`).set(as(alice)).expect(204);
    // A member receives the deletion too: the members are read before they go with the project.
    expect((await readAllChanges(service, bob, fromBob)).events.map((event) => event.type)).toEqual([
      'project.deleted',
    ]);
    expectProblem(await service.http.get(`/tasks/${taskId}`).set(as(alice)), 404, 'not_found');
    expectProblem(await service.http.get(`/tags/${tagId}`).set(as(alice)), 404, 'not_found');
    expect(await storedKeys()).toEqual(before);
    const events = (await readAllChanges(service, admin, from)).events;
    expect(events).toEqual([expect.objectContaining({ type: 'project.deleted', data: { projectId: project.id } })]);
  });

  it('leaves no bytes behind when uploads to its tasks race its deletion', async () => {
    const owner = await registerUser(service, { name: 'Racer' });
    const before = await storedKeys();
    for (let round = 0; round < 10; round++) {
      const project = await createProject(service, owner);
      const tasks = await Promise.all(
        [1, 2, 3].map(
          async (n) =>
            (
              await service.http
                .post('/tasks')
                .set(as(owner))
                .send({ title: `racing ${n}`, projectId: project.id })
                .expect(201)
            ).body as { id: string },
        ),
      );
      const uploads = tasks.flatMap((task) =>
        [1, 2, 3].map(() =>
          service.http
            .post(`/tasks/${task.id}/attachments`)
            .set(as(owner))
            .attach('file', Buffer.alloc(64 * 1024, round), { filename: 'race.bin' })
            .then((res) => res.status),
        ),
      );
      // The deletion sent later each round, so that some rounds land among the uploads.
      await new Promise((resolve) => setTimeout(resolve, 15 * round));
      const deleted = service.http
        .delete(`/projects/${project.id}`)
        .set(as(owner))
        .then((res) => res.status);
      const statuses = await Promise.all(uploads);
      expect(await deleted).toBe(204);
      // Each upload either took before the deletion (and went with it) or found its task gone.
      expect(statuses.filter((status) => status !== 201 && status !== 404)).toEqual([]);
      expect(await storedKeys(), `round ${round}: ${statuses.join(',')}`).toEqual(before);
    }
  });

  it("deleting a user deletes a project left without members, with its attachments' bytes", async () => {
    const leaver = await registerUser(service, { name: 'Leaver' });
    const project = await createProject(service, leaver);
    const before = await storedKeys();
    const { taskId } = await projectTaskAndTag(alice, project.id);
    await service.http.delete(`/users/${leaver.user.id}`).set(as(admin)).expect(204);
    expectProblem(await service.http.get(`/projects/${project.id}`).set(as(admin)), 404, 'not_found');
    expectProblem(await service.http.get(`/tasks/${taskId}`).set(as(admin)), 404, 'not_found');
    expect(await storedKeys()).toEqual(before);
  });
});

describe('roles', () => {
  it.each(['viewer', 'editor'] as const)(
    'a %s reads the project and its members, and manages nothing (403)',
    async (role) => {
      const project = await sharedProject(role);
      await addMember(service, alice, project.id, carol, 'viewer').expect(201);
      const path = `/projects/${project.id}`;
      await service.http.get(path).set(as(bob)).expect(200);
      await service.http.get(`${path}/members`).set(as(bob)).expect(200);
      expectProblem(await service.http.patch(path).set(as(bob)).send({ name: 'x' }), 403, 'forbidden');
      expectProblem(await service.http.delete(path).set(as(bob)), 403, 'forbidden');
      expectProblem(await addMember(service, bob, project.id, admin, 'viewer'), 403, 'forbidden');
      expectProblem(
        await service.http.patch(`${path}/members/${carol.user.id}`).set(as(bob)).send({ role: 'editor' }),
        403,
        'forbidden',
      );
      expectProblem(await service.http.delete(`${path}/members/${carol.user.id}`).set(as(bob)), 403, 'forbidden');
      await deleteProjectsOf(alice);
    },
  );

  it('a creating POST with an Idempotency-Key makes one project, the retry replaying its answer', async () => {
    const send = () =>
      service.http.post('/projects').set(as(bob)).set('Idempotency-Key', 'create-once').send({ name: 'Once' });
    const [first, again] = [await send(), await send()];
    expect(first.status).toBe(201);
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual(first.body);
    const page = ProjectPageSchema.parse((await service.http.get('/projects').set(as(bob)).expect(200)).body);
    expect(page.items.map((p) => p.name)).toEqual(['Once']);
    await deleteProjectsOf(bob);
  });
});

describe('project events', () => {
  it('reach the members at the time of reading, the removed member last of all', async () => {
    const start = (await readAllChanges(service, admin)).cursor;
    const startBob = (await readAllChanges(service, bob)).cursor;
    const startCarol = (await readAllChanges(service, carol)).cursor;
    const project = await createProject(service, alice);
    await addMember(service, alice, project.id, bob, 'viewer').expect(201);
    await service.http.patch(`/projects/${project.id}`).set(as(alice)).send({ name: 'Evented' }).expect(200);
    await service.http
      .patch(`/projects/${project.id}/members/${bob.user.id}`)
      .set(as(alice))
      .send({ role: 'editor' })
      .expect(200);
    // A member reads the project's events while a member (its past included, as members read it now)...
    const whileMember = await readAllChanges(service, bob, startBob);
    expect(whileMember.events.map((event) => event.type)).toEqual([
      'project.created',
      'project.member_added',
      'project.updated',
      'project.member_updated',
    ]);
    expect(whileMember.events[1]?.actorId).toBe(alice.user.id);
    await service.http.delete(`/projects/${project.id}/members/${bob.user.id}`).set(as(bob)).expect(204);
    await service.http.patch(`/projects/${project.id}`).set(as(alice)).send({ name: 'After Bob' }).expect(200);
    await service.http.delete(`/projects/${project.id}`).set(as(alice)).expect(204);

    const all = (await readAllChanges(service, admin, start)).events;
    expect(all.map((event) => event.type)).toEqual([
      'project.created',
      'project.member_added',
      'project.updated',
      'project.member_updated',
      'project.member_removed',
      'project.updated',
      'project.deleted',
    ]);
    // ...and once removed, only their removal: from where they were, and from the start alike.
    const after = (await readAllChanges(service, bob, whileMember.cursor)).events;
    expect(after.map((event) => event.type)).toEqual(['project.member_removed']);
    const again = (await readAllChanges(service, bob, startBob)).events;
    expect(again.map((event) => event.type)).toEqual(['project.member_removed']);
    expect((await readAllChanges(service, carol, startCarol)).events).toEqual([]);
  });

  it('need projects:read for a token (with events:read)', async () => {
    const withScope = await createPersonalToken(service, alice, ['events:read', 'projects:read']);
    const without = await createPersonalToken(service, alice, ['events:read', 'tasks:read']);
    const [from, fromWithout] = [
      (await readAllChanges(service, withScope)).cursor,
      (await readAllChanges(service, without)).cursor,
    ];
    await createProject(service, alice);
    expect((await readAllChanges(service, withScope, from)).events.map((e) => e.type)).toEqual(['project.created']);
    expect((await readAllChanges(service, without, fromWithout)).events).toEqual([]);
    const reader = await createPersonalToken(service, alice, ['projects:read']);
    expectProblem(await service.http.post('/projects').set(as(reader)).send({ name: 'x' }), 403, 'insufficient_scope');
    await deleteProjectsOf(alice);
  });
});

describe('scopes of personal access tokens', () => {
  it('projects:read reads projects and members, projects:write manages them; tasks in projects are under tasks:*', async () => {
    const project = await sharedProject('admin');
    const [reader, writer, tasker] = [
      await createPersonalToken(service, alice, ['projects:read']),
      await createPersonalToken(service, alice, ['projects:write']),
      await createPersonalToken(service, alice, ['tasks:read', 'tasks:write']),
    ];
    const path = `/projects/${project.id}`;
    const member = `${path}/members/${carol.user.id}`;
    for (const read of [`/projects`, path, `${path}/members`]) {
      await service.http.get(read).set(as(reader)).expect(200);
      await service.http.get(read).set(as(writer)).expect(200);
      expectProblem(await service.http.get(read).set(as(tasker)), 403, 'insufficient_scope');
    }
    const writes = [
      () => service.http.patch(path).send({ description: 'by token' }),
      () => service.http.post(`${path}/members`).send({ userId: carol.user.id, role: 'viewer' }),
      () => service.http.patch(member).send({ role: 'editor' }),
      () => service.http.delete(member),
    ];
    for (const write of writes) {
      const refused = await write().set(as(reader));
      expectProblem(refused, 403, 'insufficient_scope');
      expect(refused.headers['www-authenticate']).toContain('scope="projects:write"');
      expectProblem(await write().set(as(tasker)), 403, 'insufficient_scope');
    }
    await writes[0]?.().set(as(writer)).expect(200);
    await writes[1]?.().set(as(writer)).expect(201);
    await writes[2]?.().set(as(writer)).expect(200);
    await writes[3]?.().set(as(writer)).expect(204);
    // A task in the project: tasks:write, not projects:write.
    expectProblem(
      await service.http.post('/tasks').set(as(writer)).send({ title: 'no', projectId: project.id }),
      403,
      'insufficient_scope',
    );
    const created = await service.http
      .post('/tasks')
      .set(as(tasker))
      .send({ title: 'by token', projectId: project.id })
      .expect(201);
    const listed = await service.http.get(`/tasks?projectId=${project.id}`).set(as(tasker)).expect(200);
    expect(listed.body).toMatchObject({ items: [{ id: (created.body as { id: string }).id }] });
    // Never more than the owner may do: Bob's projects:write token of a project where he is a viewer.
    await service.http.patch(`${path}/members/${bob.user.id}`).set(as(alice)).send({ role: 'viewer' }).expect(200);
    const bobsWriter = await createPersonalToken(service, bob, ['projects:write']);
    expectProblem(await service.http.patch(path).set(as(bobsWriter)).send({ name: 'no' }), 403, 'forbidden');
    await service.http.delete(path).set(as(writer)).expect(204);
  });
});
