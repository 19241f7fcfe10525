import { v7 as uuidv7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pageOf } from '../contract/common.js';
import { MemberSchema, ProjectSchema, type Member, type Project } from '../contract/projects.js';
import { startService, type TestService } from './support/app.js';
import { readAllChanges } from './support/events.js';
import { errorPaths, expectProblem } from './support/problems.js';
import { registerAdmin, registerUser, type TestUser } from './support/users.js';
import { createProject } from './support/projects.js';

const MemberPageSchema = pageOf(MemberSchema);
// Races run round after round: on PostgreSQL the requests really interleave, but not every time.
const ROUNDS = 10;

let service: TestService;
let alice: TestUser;
let bob: TestUser;
let carol: TestUser;
let dave: TestUser;
let admin: TestUser;

beforeAll(async () => {
  service = await startService({ PROJECT_MAX_MEMBERS: '3' });
  [alice, bob, carol, dave, admin] = await Promise.all([
    registerUser(service, { name: 'Alice' }),
    registerUser(service, { name: 'Bob' }),
    registerUser(service, { name: 'Carol' }),
    registerUser(service, { name: 'Dave' }),
    registerAdmin(service),
  ]);
});
afterAll(() => service.close());

const as = (user: { auth: string }) => ({ Authorization: user.auth });

const members = (projectId: string) => `/projects/${projectId}/members`;
const member = (projectId: string, user: TestUser) => `/projects/${projectId}/members/${user.user.id}`;
const add = (by: TestUser, projectId: string, user: TestUser, role: string) =>
  service.http.post(members(projectId)).set(as(by)).send({ userId: user.user.id, role });
const setRole = (by: TestUser, projectId: string, user: TestUser, role: string) =>
  service.http.patch(member(projectId, user)).set(as(by)).send({ role });

async function listMembers(by: TestUser, projectId: string): Promise<Member[]> {
  return MemberPageSchema.parse((await service.http.get(members(projectId)).set(as(by)).expect(200)).body).items;
}

/** Alice's project with Bob as `bobRole`; Carol and Dave outside it. */
async function shared(bobRole: string): Promise<Project> {
  const project = await createProject(service, alice);
  await add(alice, project.id, bob, bobRole).expect(201);
  return project;
}

describe('POST /projects/{id}/members', () => {
  it('adds a user by id or by email with a role, 201 with Location', async () => {
    const project = await createProject(service, alice);
    const byId = await add(alice, project.id, bob, 'editor');
    expect(byId.status).toBe(201);
    expect(MemberSchema.parse(byId.body)).toMatchObject({
      userId: bob.user.id,
      name: 'Bob',
      email: bob.email,
      role: 'editor',
    });
    expect(byId.headers.location).toBe(member(project.id, bob));
    const byEmail = await service.http
      .post(members(project.id))
      .set(as(alice))
      .send({ email: `  ${carol.email.toUpperCase()} `, role: 'viewer' })
      .expect(201);
    expect(MemberSchema.parse(byEmail.body)).toMatchObject({ userId: carol.user.id, role: 'viewer' });
    expect((await listMembers(bob, project.id)).map((m) => [m.userId, m.role])).toEqual([
      [alice.user.id, 'admin'],
      [bob.user.id, 'editor'],
      [carol.user.id, 'viewer'],
    ]);
    const seen = ProjectSchema.parse((await service.http.get(`/projects/${project.id}`).set(as(carol))).body);
    expect(seen).toMatchObject({ role: 'viewer', memberCount: 3 });
  });

  it('validates the body: exactly one of userId and email, a known role', async () => {
    const project = await createProject(service, alice);
    const both = await service.http
      .post(members(project.id))
      .set(as(alice))
      .send({ userId: bob.user.id, email: bob.email, role: 'viewer' });
    expectProblem(both, 400, 'validation_failed');
    expect(errorPaths(both.body)).toEqual(['body.userId']);
    expectProblem(
      await service.http.post(members(project.id)).set(as(alice)).send({ role: 'viewer' }),
      400,
      'validation_failed',
    );
    const badRole = await service.http
      .post(members(project.id))
      .set(as(alice))
      .send({ userId: bob.user.id, role: 'owner' });
    expectProblem(badRole, 400, 'validation_failed');
    expect(errorPaths(badRole.body)).toEqual(['body.role']);
    expectProblem(await add(alice, 'nope', bob, 'viewer'), 400, 'validation_failed');
    expect(await listMembers(alice, project.id)).toHaveLength(1);
  });

  it('answers 401, 404 to outsiders and for unknown users, 403 to non-admin members before any 409', async () => {
    const project = await shared('editor');
    expectProblem(
      await service.http.post(members(project.id)).send({ userId: carol.user.id, role: 'viewer' }),
      401,
      'unauthenticated',
    );
    expectProblem(await add(carol, project.id, dave, 'viewer'), 404, 'not_found');
    expectProblem(await add(alice, uuidv7(), dave, 'viewer'), 404, 'not_found');
    const unknown = await service.http
      .post(members(project.id))
      .set(as(alice))
      .send({ email: 'nobody@example.test', role: 'viewer' });
    expect(expectProblem(unknown, 404, 'not_found').detail).toMatch(/user/);
    // Bob (an editor) adding someone who already is a member: 403, not 409.
    expectProblem(await add(bob, project.id, alice, 'viewer'), 403, 'forbidden');
    expectProblem(await add(bob, project.id, carol, 'viewer'), 403, 'forbidden');
    expectProblem(await add(alice, project.id, bob, 'viewer'), 409, 'already_member');
  });

  it('makes one membership of concurrent adds of one user (the others 409 already_member)', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const project = await createProject(service, alice);
      const answers = await Promise.all(Array.from({ length: 6 }, () => add(alice, project.id, dave, 'viewer')));
      expect(answers.filter((res) => res.status === 201)).toHaveLength(1);
      for (const res of answers.filter((r) => r.status !== 201)) expectProblem(res, 409, 'already_member');
      expect((await listMembers(alice, project.id)).map((m) => m.userId)).toEqual([alice.user.id, dave.user.id]);
    }
  });

  it('holds a project to PROJECT_MAX_MEMBERS, concurrent adds included (409 quota_exceeded)', async () => {
    const project = await createProject(service, alice);
    const answers = await Promise.all([bob, carol, dave].map((user) => add(alice, project.id, user, 'viewer')));
    expect(answers.filter((res) => res.status === 201)).toHaveLength(2);
    for (const res of answers.filter((r) => r.status !== 201)) expectProblem(res, 409, 'quota_exceeded');
    expect(await listMembers(alice, project.id)).toHaveLength(3);
  });

  it('lets an administrator who is not a member manage members', async () => {
    const project = await createProject(service, alice);
    await add(admin, project.id, bob, 'admin').expect(201);
    await setRole(admin, project.id, alice, 'viewer').expect(200);
    expect((await listMembers(admin, project.id)).map((m) => m.role)).toEqual(['viewer', 'admin']);
  });
});

describe('GET /projects/{id}/members', () => {
  it('pages members in the order they joined; outsiders 404', async () => {
    const project = await createProject(service, alice);
    for (const user of [bob, carol]) await add(alice, project.id, user, 'viewer').expect(201);
    const first = await service.http
      .get(`${members(project.id)}?limit=2`)
      .set(as(carol))
      .expect(200);
    const page1 = MemberPageSchema.parse(first.body);
    expect(page1.items.map((m) => m.userId)).toEqual([alice.user.id, bob.user.id]);
    expect(first.headers.link).toMatch(/rel="next"/);
    const page2 = MemberPageSchema.parse(
      (
        await service.http
          .get(`${members(project.id)}?limit=2&cursor=${page1.nextCursor ?? ''}`)
          .set(as(carol))
          .expect(200)
      ).body,
    );
    expect(page2).toEqual({ items: [expect.objectContaining({ userId: carol.user.id })], nextCursor: null });
    expectProblem(await service.http.get(members(project.id)).set(as(dave)), 404, 'not_found');
    expectProblem(await service.http.get(`${members(project.id)}?cursor=x.y`).set(as(alice)), 400, 'validation_failed');
    expectProblem(await service.http.get(members(project.id)), 401, 'unauthenticated');
  });
});

describe('PATCH /projects/{id}/members/{user_id}', () => {
  it("changes a member's role (project admin); 403 for others, 404 for outsiders and non-members", async () => {
    const project = await shared('viewer');
    const res = await setRole(alice, project.id, bob, 'editor').expect(200);
    expect(MemberSchema.parse(res.body)).toMatchObject({ userId: bob.user.id, role: 'editor' });
    expectProblem(await setRole(bob, project.id, bob, 'admin'), 403, 'forbidden');
    expectProblem(await setRole(carol, project.id, bob, 'viewer'), 404, 'not_found');
    expectProblem(await setRole(alice, project.id, carol, 'viewer'), 404, 'not_found');
    expectProblem(await setRole(alice, project.id, bob, 'boss'), 400, 'validation_failed');
    expectProblem(await service.http.patch(member(project.id, bob)).send({ role: 'viewer' }), 401, 'unauthenticated');
  });

  it('never demotes the last admin (409 last_project_admin); a non-admin gets 403 first', async () => {
    const project = await shared('viewer');
    expectProblem(await setRole(alice, project.id, alice, 'editor'), 409, 'last_project_admin');
    expectProblem(await setRole(bob, project.id, alice, 'editor'), 403, 'forbidden');
    await setRole(alice, project.id, bob, 'admin').expect(200);
    await setRole(alice, project.id, alice, 'editor').expect(200);
    expect((await listMembers(bob, project.id)).map((m) => m.role)).toEqual(['editor', 'admin']);
  });

  it('lets only one of two admins demoting each other at once succeed', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const project = await shared('admin');
      const answers = await Promise.all([
        setRole(alice, project.id, bob, 'viewer'),
        setRole(bob, project.id, alice, 'viewer'),
      ]);
      const statuses = answers.map((res) => res.status).sort();
      // The second to run is no longer an admin (403) or would leave none (409).
      expect(statuses[0]).toBe(200);
      expect([403, 409]).toContain(statuses[1]);
      const admins = (await listMembers(admin, project.id)).filter((m) => m.role === 'admin');
      expect(admins).toHaveLength(1);
    }
  });
});

describe('the last project admin under concurrent demotions and removals', () => {
  it('keeps exactly one admin when every admin is demoted or removed at once', async () => {
    const admins = [alice, bob];
    for (let round = 0; round < ROUNDS; round++) {
      const project = await createProject(service, dave);
      for (const user of admins) await add(dave, project.id, user, 'admin').expect(201);
      // The service's administrator changes all three at once: demotions and a removal alike.
      const answers = await Promise.all([
        ...admins.map((user) => setRole(admin, project.id, user, 'editor')),
        service.http.delete(member(project.id, dave)).set(as(admin)),
      ]);
      const statuses = answers.map((res) => res.status);
      expect(
        statuses.filter((status) => status === 409),
        statuses.join(),
      ).toHaveLength(1);
      const left = (await listMembers(admin, project.id)).filter((m) => m.role === 'admin');
      expect(left).toHaveLength(1);
    }
  });
});

describe('DELETE /projects/{id}/members/{user_id}', () => {
  it('removes a member (project admin) or lets a member leave; others 403, outsiders 404', async () => {
    const project = await shared('editor');
    await add(alice, project.id, carol, 'viewer').expect(201);
    expectProblem(await service.http.delete(member(project.id, carol)).set(as(bob)), 403, 'forbidden');
    expectProblem(await service.http.delete(member(project.id, bob)).set(as(dave)), 404, 'not_found');
    expectProblem(await service.http.delete(member(project.id, dave)).set(as(alice)), 404, 'not_found');
    expectProblem(await service.http.delete(member(project.id, bob)), 401, 'unauthenticated');
    await service.http.delete(member(project.id, carol)).set(as(carol)).expect(204);
    expectProblem(await service.http.get(`/projects/${project.id}`).set(as(carol)), 404, 'not_found');
    await service.http.delete(member(project.id, bob)).set(as(alice)).expect(204);
    expectProblem(await service.http.get(`/projects/${project.id}`).set(as(bob)), 404, 'not_found');
    expect((await listMembers(alice, project.id)).map((m) => m.userId)).toEqual([alice.user.id]);
  });

  it('never removes the last admin (409 last_project_admin), even when two admins leave at once', async () => {
    const solo = await createProject(service, alice);
    expectProblem(await service.http.delete(member(solo.id, alice)).set(as(alice)), 409, 'last_project_admin');
    for (let round = 0; round < ROUNDS; round++) {
      const project = await shared('admin');
      const answers = await Promise.all([
        service.http.delete(member(project.id, alice)).set(as(alice)),
        service.http.delete(member(project.id, bob)).set(as(bob)),
      ]);
      expect(answers.map((res) => res.status).sort()).toEqual([204, 409]);
      const left = await listMembers(admin, project.id);
      expect(left.map((m) => m.role)).toEqual(['admin']);
    }
  });
});

describe('deleting a user', () => {
  it('removes their memberships, hands projects they alone administered to the longest-standing member, deletes emptied ones', async () => {
    const leaver = await registerUser(service, { name: 'Leaver' });
    const handedOver = await createProject(service, leaver);
    await add(leaver, handedOver.id, carol, 'viewer').expect(201);
    await add(leaver, handedOver.id, bob, 'editor').expect(201);
    const alone = await createProject(service, leaver);
    const theirs = await createProject(service, alice);
    await add(alice, theirs.id, leaver, 'editor').expect(201);

    const [fromCarol, fromAlice] = [
      (await readAllChanges(service, carol)).cursor,
      (await readAllChanges(service, alice)).cursor,
    ];
    await service.http.delete(`/users/${leaver.user.id}`).set(as(admin)).expect(204);
    // Carol is told she became admin, then that the leaver left; Alice that the leaver left hers.
    const carols = (await readAllChanges(service, carol, fromCarol)).events;
    expect(carols.map((event) => [event.type, event.data])).toEqual([
      [
        'project.member_updated',
        { projectId: handedOver.id, member: expect.objectContaining({ userId: carol.user.id, role: 'admin' }) },
      ],
      ['project.member_removed', { projectId: handedOver.id, userId: leaver.user.id }],
    ]);
    const alices = (await readAllChanges(service, alice, fromAlice)).events;
    expect(alices.map((event) => [event.type, event.data])).toEqual([
      ['project.member_removed', { projectId: theirs.id, userId: leaver.user.id }],
    ]);

    expect((await listMembers(carol, handedOver.id)).map((m) => [m.userId, m.role])).toEqual([
      [carol.user.id, 'admin'],
      [bob.user.id, 'editor'],
    ]);
    expectProblem(await service.http.get(`/projects/${alone.id}`).set(as(admin)), 404, 'not_found');
    expect((await listMembers(alice, theirs.id)).map((m) => m.userId)).toEqual([alice.user.id]);
  });
});
