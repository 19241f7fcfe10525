import { v7 as uuidv7 } from 'uuid';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { pageOf } from '../contract/common.js';
import { RelationSchema } from '../contract/relations.js';
import type { Event } from '../contract/events.js';
import { TaskSchema } from '../contract/tasks.js';
import { serviceForFile } from './support/app.js';
import { bulkLoad } from './support/databases.js';
import { ofType, readAllChanges } from './support/events.js';
import { errorPaths, expectProblem } from './support/problems.js';
import { createTask, getTask } from './support/tasks.js';
import { registerUser, userForFile, type TestUser } from './support/users.js';
import { createProject } from './support/projects.js';

// Relations between tasks: made and removed by whoever may change the first task, listed from
// either side with inverse types, `blocks` never a cycle (also at once), Task.blocked kept by the
// writes (each flip a new version and a task.updated), at most 500 relations a task, and events.
const service = serviceForFile();
const alice = userForFile(service);
const bob = userForFile(service);
const ROUNDS = 6;

const as = (user: { auth: string }) => ({ Authorization: user.auth });
const relate = (user: TestUser, taskId: string, type: string, otherId: string) =>
  service.http.post(`/tasks/${taskId}/relations`).set(as(user)).send({ type, taskId: otherId });
const unrelate = (user: TestUser, taskId: string, type: string, otherId: string) =>
  service.http.delete(`/tasks/${taskId}/relations/${type}/${otherId}`).set(as(user));
const RelationsSchema = z.object({ items: z.array(RelationSchema) });

/** The task.updated events of one task among `events`, as the task and what it changed. */
const updatesOf = (events: Event[], taskId: string) =>
  ofType(events, 'task.updated')
    .filter((event) => event.data.task.id === taskId)
    .map((event) => ({ task: event.data.task, previous: event.data.previous }));

async function relationsOf(user: TestUser, taskId: string) {
  const res = await service.http.get(`/tasks/${taskId}/relations`).set(as(user)).expect(200);
  return RelationsSchema.parse(res.body).items.map((relation) => `${relation.type} ${relation.task.id}`);
}

describe('relations', () => {
  it('are made (201, then 200), listed from both sides with inverse types, and removed (204, then 404)', async () => {
    const [a, b, c] = [
      await createTask(service, alice),
      await createTask(service, alice),
      await createTask(service, alice),
    ];
    const made = await relate(alice, a.id, 'blocks', b.id).expect(201);
    expect(RelationSchema.parse(made.body)).toEqual({
      type: 'blocks',
      task: { id: b.id, title: b.title, status: 'todo' },
    });
    expect(made.headers.location).toBe(`/tasks/${a.id}/relations/blocks/${b.id}`);
    await relate(alice, a.id, 'blocks', b.id).expect(200);
    await relate(alice, a.id, 'duplicates', c.id).expect(201);
    await relate(alice, c.id, 'relates_to', b.id).expect(201);
    // relates_to is the same from both sides: made again from the other side, it already exists.
    await relate(alice, b.id, 'relates_to', c.id).expect(200);
    expect(await relationsOf(alice, a.id)).toEqual([`blocks ${b.id}`, `duplicates ${c.id}`]);
    expect(await relationsOf(alice, b.id)).toEqual([`blocked_by ${a.id}`, `relates_to ${c.id}`]);
    expect(await relationsOf(alice, c.id)).toEqual([`duplicated_by ${a.id}`, `relates_to ${b.id}`]);
    // Removed from either side, by the type it shows there.
    await unrelate(alice, b.id, 'blocked_by', a.id).expect(204);
    expectProblem(await unrelate(alice, a.id, 'blocks', b.id), 404, 'not_found');
    await unrelate(alice, b.id, 'relates_to', c.id).expect(204);
    expect(await relationsOf(alice, b.id)).toEqual([]);
  });

  it('are refused on bad input: 400 for the same task, an unseen one, a bad type; 401; 404 for an unseen first task', async () => {
    const [mine, bobs] = [await createTask(service, alice), await createTask(service, bob)];
    const self = await relate(alice, mine.id, 'blocks', mine.id);
    expectProblem(self, 400, 'validation_failed');
    expect(errorPaths(self.body)).toEqual(['body.taskId']);
    for (const other of [bobs.id, uuidv7()]) {
      const res = await relate(alice, mine.id, 'relates_to', other);
      expectProblem(res, 400, 'validation_failed');
      expect(errorPaths(res.body)).toEqual(['body.taskId']);
    }
    expectProblem(await relate(alice, mine.id, 'blocked_by', bobs.id), 400, 'validation_failed');
    expectProblem(
      await service.http.post(`/tasks/${mine.id}/relations`).send({ type: 'blocks', taskId: bobs.id }),
      401,
      'unauthenticated',
    );
    expectProblem(await service.http.get(`/tasks/${mine.id}/relations`), 401, 'unauthenticated');
    expectProblem(await relate(bob, mine.id, 'blocks', bobs.id), 404, 'not_found');
    expectProblem(await service.http.get(`/tasks/${mine.id}/relations`).set(as(bob)), 404, 'not_found');
    expectProblem(await unrelate(bob, mine.id, 'blocks', bobs.id), 404, 'not_found');
    expectProblem(await unrelate(alice, mine.id, 'sideways', bobs.id), 400, 'validation_failed');
  });

  it('of type blocks never make a cycle (400), however long', async () => {
    const [a, b, c] = [
      await createTask(service, alice),
      await createTask(service, alice),
      await createTask(service, alice),
    ];
    await relate(alice, a.id, 'blocks', b.id).expect(201);
    await relate(alice, b.id, 'blocks', c.id).expect(201);
    for (const [from, to] of [
      [b, a],
      [c, a],
    ] as const) {
      const res = await relate(alice, from.id, 'blocks', to.id);
      expectProblem(res, 400, 'validation_failed');
      expect(errorPaths(res.body)).toEqual(['body.taskId']);
    }
    // Other types may go either way.
    await relate(alice, c.id, 'relates_to', a.id).expect(201);
  });

  it('of type blocks made at once both ways, or closing a loop of four from two sides: one succeeds', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const [a, b] = [await createTask(service, alice), await createTask(service, alice)];
      const pair = await Promise.all([relate(alice, a.id, 'blocks', b.id), relate(alice, b.id, 'blocks', a.id)]);
      expect(pair.map((res) => res.status).sort()).toEqual([201, 400]);
      // q blocks r, s blocks p; then p → q and r → s at once close p → q → r → s → p, though the two
      // requests share no task.
      const [p, q, r, t] = await Promise.all([1, 2, 3, 4].map(() => createTask(service, alice)));
      await relate(alice, q!.id, 'blocks', r!.id).expect(201);
      await relate(alice, t!.id, 'blocks', p!.id).expect(201);
      const loop = await Promise.all([relate(alice, p!.id, 'blocks', q!.id), relate(alice, r!.id, 'blocks', t!.id)]);
      expect(loop.map((res) => res.status).sort()).toEqual([201, 400]);
    }
  });

  it('make a task blocked while an unfinished blocker blocks it, each flip a new version with its task.updated', async () => {
    const [blocker, second, blocked] = [
      await createTask(service, alice),
      await createTask(service, alice),
      await createTask(service, alice),
    ];
    const start = (await readAllChanges(service, alice)).cursor;
    await relate(alice, blocker.id, 'blocks', blocked.id).expect(201);
    let now = await getTask(service, alice, blocked.id);
    expect(now).toMatchObject({ blocked: true, version: blocked.version + 1 });
    // A second blocker changes nothing shown.
    await relate(alice, second.id, 'blocks', blocked.id).expect(201);
    expect((await getTask(service, alice, blocked.id)).version).toBe(now.version);
    await service.http.patch(`/tasks/${blocker.id}`).set(as(alice)).send({ status: 'done' }).expect(200);
    expect((await getTask(service, alice, blocked.id)).blocked).toBe(true);
    await service.http.delete(`/tasks/${second.id}`).set(as(alice)).expect(204);
    now = await getTask(service, alice, blocked.id);
    expect(now).toMatchObject({ blocked: false, version: blocked.version + 2 });
    // The blocker leaves done: blocked again; the relation removed: not blocked.
    await service.http.patch(`/tasks/${blocker.id}`).set(as(alice)).send({ status: 'todo' }).expect(200);
    expect(await getTask(service, alice, blocked.id)).toMatchObject({ blocked: true, version: now.version + 1 });
    await unrelate(alice, blocked.id, 'blocked_by', blocker.id).expect(204);
    const last = await getTask(service, alice, blocked.id);
    expect(last).toMatchObject({ blocked: false, version: now.version + 2 });
    const events = (await readAllChanges(service, alice, start)).events;
    const flips = ofType(events, 'task.updated').filter((event) => event.data.task.id === blocked.id);
    expect(flips.map((event) => event.data.task.blocked)).toEqual([true, false, true, false]);
    expect(flips.at(-1)?.data.task).toEqual(last);
    expect(ofType(events, 'relation.created').map((event) => event.data.relation)).toEqual([
      { taskId: blocker.id, type: 'blocks', otherTaskId: blocked.id },
      { taskId: second.id, type: 'blocks', otherTaskId: blocked.id },
    ]);
    expect(ofType(events, 'relation.deleted').map((event) => event.data.relation)).toEqual([
      { taskId: blocked.id, type: 'blocked_by', otherTaskId: blocker.id },
    ]);
  });

  it('GET /tasks?blocked= lists the blocked tasks, or those that are not', async () => {
    const [blocker, blocked, free] = [
      await createTask(service, bob),
      await createTask(service, bob),
      await createTask(service, bob),
    ];
    await relate(bob, blocker.id, 'blocks', blocked.id).expect(201);
    const ids = async (query: string) => {
      const res = await service.http.get(`/tasks?limit=100${query}`).set(as(bob)).expect(200);
      return pageOf(TaskSchema)
        .parse(res.body)
        .items.map((task) => task.id);
    };
    expect(await ids('&blocked=true')).toEqual([blocked.id]);
    // Bob's other tasks are not blocked either.
    expect(await ids('&blocked=false')).toEqual(expect.arrayContaining([blocker.id, free.id]));
    expect(await ids('&blocked=false')).not.toContain(blocked.id);
    expectProblem(await service.http.get('/tasks?blocked=yes').set(as(bob)), 400, 'validation_failed');
  });

  it('are removed with either task; the other lists none', async () => {
    const [a, b] = [await createTask(service, alice), await createTask(service, alice)];
    await relate(alice, a.id, 'relates_to', b.id).expect(201);
    await service.http.delete(`/tasks/${a.id}`).set(as(alice)).expect(204);
    expect(await relationsOf(alice, b.id)).toEqual([]);
  });

  it('are at most 500 a task, either side (409 conflict)', async () => {
    const [full, other] = [await createTask(service, alice), await createTask(service, alice)];
    // 250 relations made on the task and 250 made on others toward it, loaded directly.
    await bulkLoad(service.databaseUrl ?? '', async (run) => {
      await run(
        `WITH made AS (
           INSERT INTO tasks (id, owner_id, title, created_at, updated_at)
           SELECT gen_random_uuid(), $2::uuid, 'filler ' || i, now(), now() FROM generate_series(1, 500) i RETURNING id
         )
         INSERT INTO task_relations (task_id, type, other_task_id)
         SELECT CASE WHEN n % 2 = 0 THEN $1::uuid ELSE id END, 'relates_to', CASE WHEN n % 2 = 0 THEN id ELSE $1::uuid END
         FROM (SELECT id, row_number() OVER () AS n FROM made) m`,
        [full.id, alice.user.id],
      );
    });
    expect(await relationsOf(alice, full.id)).toHaveLength(500);
    expectProblem(await relate(alice, full.id, 'blocks', other.id), 409, 'conflict');
    expectProblem(await relate(alice, other.id, 'blocks', full.id), 409, 'conflict');
    expect((await getTask(service, alice, other.id)).blocked).toBe(false);
  });

  it('lose the blockers that go with their project: the tasks they blocked elsewhere are unblocked, each with its task.updated', async () => {
    const project = (await createProject(service, alice)).id;
    const [inProject, doneInProject] = [
      await createTask(service, alice, { projectId: project }),
      await createTask(service, alice, { projectId: project, status: 'done' }),
    ];
    const [alone, alsoByOther, other] = [
      await createTask(service, alice),
      await createTask(service, alice),
      await createTask(service, alice),
    ];
    await relate(alice, inProject.id, 'blocks', alone.id).expect(201);
    await relate(alice, doneInProject.id, 'blocks', alone.id).expect(201);
    await relate(alice, inProject.id, 'blocks', alsoByOther.id).expect(201);
    await relate(alice, other.id, 'blocks', alsoByOther.id).expect(201);
    const [aloneBefore, alsoBefore] = [
      await getTask(service, alice, alone.id),
      await getTask(service, alice, alsoByOther.id),
    ];
    expect([aloneBefore.blocked, alsoBefore.blocked]).toEqual([true, true]);
    const start = (await readAllChanges(service, alice)).cursor;
    await service.http.delete(`/projects/${project}`).set(as(alice)).expect(204);
    const aloneAfter = await getTask(service, alice, alone.id);
    expect(aloneAfter).toMatchObject({ blocked: false, version: aloneBefore.version + 1 });
    // Still blocked by its other blocker: nothing it shows changed.
    expect(await getTask(service, alice, alsoByOther.id)).toEqual(alsoBefore);
    const events = (await readAllChanges(service, alice, start)).events;
    expect(updatesOf(events, alone.id)).toEqual([{ task: aloneAfter, previous: { blocked: true } }]);
    expect(updatesOf(events, alsoByOther.id)).toEqual([]);
    // Its count lost the project's blocker: its other blocker done, it is not blocked any more.
    await service.http.patch(`/tasks/${other.id}`).set(as(alice)).send({ status: 'done' }).expect(200);
    expect((await getTask(service, alice, alsoByOther.id)).blocked).toBe(false);
  });

  it('lose the blockers that go with a deleted user (personal tasks, projects left without members): the tasks they blocked are unblocked', async () => {
    const leaver = await registerUser(service);
    // Alice's project where the leaver is an editor: they see its tasks and may relate theirs to them.
    const shared = (await createProject(service, alice)).id;
    await service.http
      .post(`/projects/${shared}/members`)
      .set(as(alice))
      .send({ userId: leaver.user.id, role: 'editor' })
      .expect(201);
    const [byPersonal, byTheirProject, byBoth] = [
      await createTask(service, alice, { projectId: shared }),
      await createTask(service, alice, { projectId: shared }),
      await createTask(service, alice, { projectId: shared }),
    ];
    const personal = await createTask(service, leaver);
    const theirProject = (await createProject(service, leaver)).id;
    const inTheirProject = await createTask(service, leaver, { projectId: theirProject });
    // A task the leaver made in the shared project outlives them (handed over), and still blocks.
    const handedOver = await createTask(service, leaver, { projectId: shared });
    await relate(leaver, personal.id, 'blocks', byPersonal.id).expect(201);
    await relate(leaver, inTheirProject.id, 'blocks', byTheirProject.id).expect(201);
    await relate(leaver, personal.id, 'blocks', byBoth.id).expect(201);
    await relate(leaver, handedOver.id, 'blocks', byBoth.id).expect(201);
    const before = await Promise.all(
      [byPersonal, byTheirProject, byBoth].map((task) => getTask(service, alice, task.id)),
    );
    expect(before.map((task) => task.blocked)).toEqual([true, true, true]);
    const start = (await readAllChanges(service, alice)).cursor;
    await service.http.delete(`/users/${leaver.user.id}`).set(as(leaver)).expect(204);
    const after = await Promise.all(
      [byPersonal, byTheirProject, byBoth].map((task) => getTask(service, alice, task.id)),
    );
    expect(after.map((task) => task.blocked)).toEqual([false, false, true]);
    expect(after.map((task, i) => task.version - before[i]!.version)).toEqual([1, 1, 0]);
    const events = (await readAllChanges(service, alice, start)).events;
    expect(updatesOf(events, byPersonal.id)).toEqual([{ task: after[0], previous: { blocked: true } }]);
    expect(updatesOf(events, byTheirProject.id)).toEqual([{ task: after[1], previous: { blocked: true } }]);
    expect(updatesOf(events, byBoth.id)).toEqual([]);
    // Its one blocker left is the handed-over task: done, the task is not blocked any more.
    await service.http.patch(`/tasks/${handedOver.id}`).set(as(alice)).send({ status: 'done' }).expect(200);
    expect((await getTask(service, alice, byBoth.id)).blocked).toBe(false);
  });
});
