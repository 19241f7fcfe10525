import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { pageOf, ProblemSchema } from '../contract/common.js';
import { tables } from '../server/db/query.js';
import { TaskSchema, type Task } from '../contract/tasks.js';
import { serviceForFile } from './support/app.js';
import { type TestUser, userForFile } from './support/users.js';
import { errorPaths, expectProblem } from './support/problems.js';
import { walkPages } from './support/pages.js';
import { countOf, countOwned, countTasks, insertTags } from './support/rows.js';
import { createTask, getTask } from './support/tasks.js';

const TaskPageSchema = pageOf(TaskSchema);

const service = serviceForFile();
const alice = userForFile(service, { name: 'Alice' });
const bob = userForFile(service, { name: 'Bob' });
const carol = userForFile(service, { name: 'Carol' });
const admin = userForFile(service, { admin: true });

/** Every task of GET /tasks for the user, page by page to the end. */
const listAll = async (user: TestUser, query = ''): Promise<Task[]> =>
  (await walkPages(service, user.auth, `/tasks?limit=100${query}`, TaskPageSchema)).flat();

describe('POST /tasks', () => {
  it('creates a task with defaults, Location and ETag "1"', async () => {
    const res = await service.http
      .post('/tasks')
      .set('Authorization', alice.auth)
      .send({ title: 'Write tests' })
      .expect(201);
    const task = TaskSchema.parse(res.body);
    expect(res.headers['location']).toBe(`/tasks/${task.id}`);
    expect(res.headers['etag']).toBe('"1"');
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(task).toMatchObject({
      ownerId: alice.user.id,
      title: 'Write tests',
      description: '',
      status: 'todo',
      priority: 'medium',
      dueAt: null,
      completedAt: null,
      assigneeId: null,
      tags: [],
      attachmentCount: 0,
      version: 1,
    });
    expect(task.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(task.createdAt).toBe(task.updatedAt);
    const fetched = await service.http
      .get(res.headers['location'] ?? '')
      .set('Authorization', alice.auth)
      .expect(200);
    expect(TaskSchema.parse(fetched.body)).toEqual(task);
  });

  it('stores every given field, dueAt normalised to UTC with milliseconds', async () => {
    const task = await createTask(service, alice, {
      title: 'Full',
      description: 'All the fields',
      status: 'in_progress',
      priority: 'urgent',
      dueAt: '2027-03-04T12:30:00+02:00',
      assigneeId: bob.user.id,
    });
    expect(task).toMatchObject({
      title: 'Full',
      description: 'All the fields',
      status: 'in_progress',
      priority: 'urgent',
      dueAt: '2027-03-04T10:30:00.000Z',
      assigneeId: bob.user.id,
      completedAt: null,
    });
  });

  it('accepts fractional seconds and the extremes of the year range', async () => {
    expect((await createTask(service, alice, { dueAt: '2027-01-01T10:00:00.123456Z' })).dueAt).toBe(
      '2027-01-01T10:00:00.123Z',
    );
    expect((await createTask(service, alice, { dueAt: '0001-01-01T00:00:00Z' })).dueAt).toBe(
      '0001-01-01T00:00:00.000Z',
    );
    expect((await createTask(service, alice, { dueAt: '9999-12-31T23:59:59.999Z' })).dueAt).toBe(
      '9999-12-31T23:59:59.999Z',
    );
  });

  it("attaches the owner's own tags given as tagIds, and rejects anyone else's", async () => {
    const mine = randomUUID();
    const theirs = randomUUID();
    await insertTags(service.ctx.db.sql, [
      { id: mine, ownerId: alice.user.id, name: 'Mine', color: '#000000' },
      { id: theirs, ownerId: bob.user.id, name: 'Theirs', color: '#ffffff' },
    ]);
    const task = await createTask(service, alice, { tagIds: [mine, mine] });
    expect(task.tags).toEqual([{ id: mine, name: 'Mine', color: '#000000' }]);
    expect(task.version).toBe(1);
    for (const tagIds of [[theirs], [mine, theirs], [randomUUID()]]) {
      const res = await service.http.post('/tasks').set('Authorization', alice.auth).send({ title: 'x', tagIds });
      expectProblem(res, 400, 'validation_failed');
      expect(errorPaths(res.body)).toEqual(['body.tagIds']);
    }
  });

  it('trims the title', async () => {
    const task = await createTask(service, alice, { title: '  padded title \t' });
    expect(task.title).toBe('padded title');
  });

  it('accepts a title of 200 characters and a description of 10000', async () => {
    const task = await createTask(service, alice, { title: 't'.repeat(200), description: 'd'.repeat(10_000) });
    expect(task.title).toHaveLength(200);
    expect(task.description).toHaveLength(10_000);
  });

  it.each([
    ['a missing title', {}, 'body.title'],
    ['an empty title', { title: '' }, 'body.title'],
    ['a whitespace-only title', { title: '   \t ' }, 'body.title'],
    ['a title over 200 characters', { title: 't'.repeat(201) }, 'body.title'],
    ['a title of the wrong type', { title: 42 }, 'body.title'],
    ['a description over 10000 characters', { title: 'x', description: 'd'.repeat(10_001) }, 'body.description'],
    ['an unknown status', { title: 'x', status: 'finished' }, 'body.status'],
    ['an unknown priority', { title: 'x', priority: 'critical' }, 'body.priority'],
    ['a dueAt that is not a timestamp', { title: 'x', dueAt: 'tomorrow' }, 'body.dueAt'],
    ['a dueAt that is only a date', { title: 'x', dueAt: '2027-01-01' }, 'body.dueAt'],
    ['a dueAt with a space separator', { title: 'x', dueAt: '2027-01-01 10:00:00Z' }, 'body.dueAt'],
    ['a dueAt without an offset', { title: 'x', dueAt: '2027-01-01T10:00:00' }, 'body.dueAt'],
    ['a dueAt on a day that does not exist', { title: 'x', dueAt: '2027-02-30T10:00:00Z' }, 'body.dueAt'],
    ['a dueAt as a number', { title: 'x', dueAt: 1767261600000 }, 'body.dueAt'],
    ['a dueAt without seconds', { title: 'x', dueAt: '2027-01-01T10:00Z' }, 'body.dueAt'],
    ['a dueAt with an offset lacking its colon', { title: 'x', dueAt: '2027-01-01T10:00:00+0200' }, 'body.dueAt'],
    ['a dueAt in year 0000', { title: 'x', dueAt: '0000-06-01T00:00:00Z' }, 'body.dueAt'],
    ['a dueAt past year 9999 in UTC', { title: 'x', dueAt: '9999-12-31T23:00:00-05:00' }, 'body.dueAt'],
    ['a title with a NUL character', { title: 'a\u0000b' }, 'body.title'],
    ['a description with a NUL character', { title: 'x', description: 'a\u0000b' }, 'body.description'],
    ['a malformed assigneeId', { title: 'x', assigneeId: 'bob' }, 'body.assigneeId'],
    ['an unknown field', { title: 'x', colour: 'red' }, 'body'],
  ])('rejects %s with 400', async (_name, body, path) => {
    const res = await service.http.post('/tasks').set('Authorization', alice.auth).send(body);
    expectProblem(res, 400, 'validation_failed');
    expect(errorPaths(res.body)).toContain(path);
  });

  it.each([
    ['id', randomUUID()],
    ['ownerId', randomUUID()],
    ['version', 7],
    ['completedAt', '2027-01-01T00:00:00.000Z'],
    ['createdAt', '2027-01-01T00:00:00.000Z'],
    ['updatedAt', '2027-01-01T00:00:00.000Z'],
    ['attachmentCount', 3],
  ])('rejects the server-owned field %s with 400', async (field, value) => {
    const res = await service.http
      .post('/tasks')
      .set('Authorization', alice.auth)
      .send({ title: 'x', [field]: value });
    const problem = expectProblem(res, 400, 'validation_failed');
    expect(problem.detail).toContain(field);
  });

  it('rejects an assignee who is not a user with 400', async () => {
    const res = await service.http
      .post('/tasks')
      .set('Authorization', alice.auth)
      .send({ title: 'x', assigneeId: randomUUID() });
    expectProblem(res, 400, 'validation_failed');
    expect(errorPaths(res.body)).toEqual(['body.assigneeId']);
  });

  it('lists every issue of an invalid body at once', async () => {
    const res = await service.http
      .post('/tasks')
      .set('Authorization', alice.auth)
      .send({ title: '', status: 'nope', priority: 'nope' });
    expectProblem(res, 400, 'validation_failed');
    expect(errorPaths(res.body)).toEqual(expect.arrayContaining(['body.title', 'body.status', 'body.priority']));
  });

  it('sets completedAt when created as done', async () => {
    const task = await createTask(service, alice, { status: 'done' });
    expect(task.completedAt).toBe(task.createdAt);
  });

  it('answers 401 with WWW-Authenticate without a token, and creates nothing', async () => {
    const before = await countTasks(service.ctx.db.sql);
    const res = await service.http.post('/tasks').send({ title: 'anonymous' });
    expectProblem(res, 401, 'unauthenticated');
    expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
    expect(await countTasks(service.ctx.db.sql)).toBe(before);
  });

  it('answers 401 for a malformed token', async () => {
    const res = await service.http.post('/tasks').set('Authorization', 'Bearer not-a-jwt').send({ title: 'x' });
    expectProblem(res, 401, 'unauthenticated');
  });

  it('answers 415 for a text/plain body', async () => {
    const res = await service.http
      .post('/tasks')
      .set('Authorization', alice.auth)
      .set('Content-Type', 'text/plain')
      .send('{"title":"x"}');
    expectProblem(res, 415, 'unsupported_media_type');
  });

  it('answers 400 malformed_json for a body that is not JSON', async () => {
    const res = await service.http
      .post('/tasks')
      .set('Authorization', alice.auth)
      .set('Content-Type', 'application/json')
      .send('{"title":');
    expectProblem(res, 400, 'malformed_json');
  });
});

describe('GET /tasks/{id}', () => {
  it('answers 200 with the ETag of the version', async () => {
    const task = await createTask(service, alice);
    const res = await service.http.get(`/tasks/${task.id}`).set('Authorization', alice.auth).expect(200);
    expect(res.headers['etag']).toBe('"1"');
    expect(TaskSchema.parse(res.body)).toEqual(task);
  });

  it('answers 304 with no body for the current ETag, 200 for a stale one', async () => {
    const task = await createTask(service, alice);
    const fresh = await service.http
      .get(`/tasks/${task.id}`)
      .set('Authorization', alice.auth)
      .set('If-None-Match', '"1"');
    expect(fresh.status).toBe(304);
    expect(fresh.text).toBeFalsy();
    expect(fresh.headers['etag']).toBe('"1"');

    await service.http
      .patch(`/tasks/${task.id}`)
      .set('Authorization', alice.auth)
      .send({ priority: 'high' })
      .expect(200);
    const stale = await service.http
      .get(`/tasks/${task.id}`)
      .set('Authorization', alice.auth)
      .set('If-None-Match', '"1"')
      .expect(200);
    expect(stale.headers['etag']).toBe('"2"');
    expect(TaskSchema.parse(stale.body).priority).toBe('high');

    const list = await service.http
      .get(`/tasks/${task.id}`)
      .set('Authorization', alice.auth)
      .set('If-None-Match', '"9", W/"2"');
    expect(list.status).toBe(304);
    const star = await service.http.get(`/tasks/${task.id}`).set('Authorization', alice.auth).set('If-None-Match', '*');
    expect(star.status).toBe(304);
  });

  it('answers 404 for an unknown id and 400 for a malformed one', async () => {
    expectProblem(await service.http.get(`/tasks/${randomUUID()}`).set('Authorization', alice.auth), 404, 'not_found');
    const res = await service.http.get('/tasks/not-a-uuid').set('Authorization', alice.auth);
    expectProblem(res, 400, 'validation_failed');
    expect(errorPaths(res.body)).toEqual(['path.task_id']);
  });

  it('answers 401 without a token', async () => {
    const task = await createTask(service, alice);
    expectProblem(await service.http.get(`/tasks/${task.id}`), 401, 'unauthenticated');
  });
});

describe("another user's task", () => {
  it('is 404 for GET, PUT, PATCH and DELETE, and stays unchanged', async () => {
    const task = await createTask(service, alice, { title: 'private' });
    const replacement = {
      title: 'stolen',
      description: '',
      status: 'todo',
      priority: 'low',
      dueAt: null,
      assigneeId: null,
    };
    expectProblem(await service.http.get(`/tasks/${task.id}`).set('Authorization', bob.auth), 404, 'not_found');
    expectProblem(
      await service.http.put(`/tasks/${task.id}`).set('Authorization', bob.auth).send(replacement),
      404,
      'not_found',
    );
    expectProblem(
      await service.http.patch(`/tasks/${task.id}`).set('Authorization', bob.auth).send({ title: 'stolen' }),
      404,
      'not_found',
    );
    expectProblem(await service.http.delete(`/tasks/${task.id}`).set('Authorization', bob.auth), 404, 'not_found');
    expect(await getTask(service, alice, task.id)).toEqual(task);
  });

  it('answers the same 404 as a task that does not exist', async () => {
    const task = await createTask(service, alice);
    const hidden = ProblemSchema.parse(
      (await service.http.get(`/tasks/${task.id}`).set('Authorization', bob.auth)).body,
    );
    const missing = ProblemSchema.parse(
      (await service.http.get(`/tasks/${randomUUID()}`).set('Authorization', bob.auth)).body,
    );
    expect(hidden.detail).toBe(missing.detail);
  });
});

describe('PUT /tasks/{id}', () => {
  const full = {
    title: 'Replaced',
    description: 'new text',
    status: 'in_progress',
    priority: 'high',
    dueAt: '2027-05-01T09:00:00.000Z',
    assigneeId: null,
  };

  it('replaces every field and bumps the version', async () => {
    const task = await createTask(service, alice, {
      description: 'old',
      priority: 'low',
      dueAt: '2027-01-01T00:00:00Z',
      assigneeId: bob.user.id,
    });
    const res = await service.http.put(`/tasks/${task.id}`).set('Authorization', alice.auth).send(full).expect(200);
    expect(res.headers['etag']).toBe('"2"');
    const replaced = TaskSchema.parse(res.body);
    expect(replaced).toMatchObject({
      ...full,
      id: task.id,
      ownerId: alice.user.id,
      version: 2,
      createdAt: task.createdAt,
      completedAt: null,
    });
    expect(Date.parse(replaced.updatedAt)).toBeGreaterThanOrEqual(Date.parse(task.updatedAt));
    expect(await getTask(service, alice, task.id)).toEqual(replaced);
  });

  it('accepts explicit nulls for dueAt and assigneeId and clears them', async () => {
    const task = await createTask(service, alice, { dueAt: '2027-01-01T00:00:00Z', assigneeId: bob.user.id });
    const res = await service.http
      .put(`/tasks/${task.id}`)
      .set('Authorization', alice.auth)
      .send({ ...full, dueAt: null, assigneeId: null })
      .expect(200);
    expect(TaskSchema.parse(res.body)).toMatchObject({ dueAt: null, assigneeId: null });
  });

  it.each(['title', 'description', 'status', 'priority', 'dueAt', 'assigneeId'])(
    'requires %s (400 when missing)',
    async (field) => {
      const task = await createTask(service, alice);
      const body: Record<string, unknown> = { ...full };
      delete body[field];
      const res = await service.http.put(`/tasks/${task.id}`).set('Authorization', alice.auth).send(body);
      expectProblem(res, 400, 'validation_failed');
      expect(errorPaths(res.body)).toEqual([`body.${field}`]);
      expect((await getTask(service, alice, task.id)).version).toBe(1);
    },
  );

  it.each([
    ['a whitespace-only title', { title: '  ' }],
    ['a null title', { title: null }],
    ['a null description', { description: null }],
    ['a null status', { status: null }],
    ['a server-owned field', { version: 5 }],
    ['an unknown assignee', { assigneeId: randomUUID() }],
  ])('rejects %s with 400', async (_name, override) => {
    const task = await createTask(service, alice);
    expectProblem(
      await service.http
        .put(`/tasks/${task.id}`)
        .set('Authorization', alice.auth)
        .send({ ...full, ...override }),
      400,
      'validation_failed',
    );
  });

  it('answers 412 for a stale If-Match and 200 for the current one', async () => {
    const task = await createTask(service, alice);
    await service.http.patch(`/tasks/${task.id}`).set('Authorization', alice.auth).send({ title: 'v2' }).expect(200);
    const stale = await service.http
      .put(`/tasks/${task.id}`)
      .set('Authorization', alice.auth)
      .set('If-Match', '"1"')
      .send(full);
    expectProblem(stale, 412, 'precondition_failed');
    expect((await getTask(service, alice, task.id)).title).toBe('v2');
    const current = await service.http
      .put(`/tasks/${task.id}`)
      .set('Authorization', alice.auth)
      .set('If-Match', '"2"')
      .send(full)
      .expect(200);
    expect(current.headers['etag']).toBe('"3"');
    expect(TaskSchema.parse(current.body).title).toBe('Replaced');
  });

  it('sets completedAt when replaced as done', async () => {
    const task = await createTask(service, alice);
    const res = await service.http
      .put(`/tasks/${task.id}`)
      .set('Authorization', alice.auth)
      .send({ ...full, status: 'done' })
      .expect(200);
    const done = TaskSchema.parse(res.body);
    expect(done.completedAt).toBe(done.updatedAt);
  });

  it('answers 415 for text/plain', async () => {
    const task = await createTask(service, alice);
    const res = await service.http
      .put(`/tasks/${task.id}`)
      .set('Authorization', alice.auth)
      .set('Content-Type', 'text/plain')
      .send(JSON.stringify(full));
    expectProblem(res, 415, 'unsupported_media_type');
  });
});

describe('PATCH /tasks/{id}', () => {
  it('accepts application/json and application/merge-patch+json', async () => {
    const task = await createTask(service, alice);
    const json = await service.http
      .patch(`/tasks/${task.id}`)
      .set('Authorization', alice.auth)
      .set('Content-Type', 'application/json')
      .send(JSON.stringify({ title: 'via json' }))
      .expect(200);
    expect(TaskSchema.parse(json.body)).toMatchObject({ title: 'via json', version: 2 });
    const merge = await service.http
      .patch(`/tasks/${task.id}`)
      .set('Authorization', alice.auth)
      .set('Content-Type', 'application/merge-patch+json')
      .send(JSON.stringify({ title: 'via merge patch' }))
      .expect(200);
    expect(merge.headers['etag']).toBe('"3"');
    expect(TaskSchema.parse(merge.body)).toMatchObject({ title: 'via merge patch', version: 3 });
  });

  it('answers 415 for text/plain', async () => {
    const task = await createTask(service, alice);
    const res = await service.http
      .patch(`/tasks/${task.id}`)
      .set('Authorization', alice.auth)
      .set('Content-Type', 'text/plain')
      .send('{"title":"x"}');
    expectProblem(res, 415, 'unsupported_media_type');
  });

  it('leaves absent fields unchanged', async () => {
    const task = await createTask(service, alice, {
      description: 'keep',
      priority: 'high',
      dueAt: '2027-01-01T00:00:00Z',
      assigneeId: bob.user.id,
    });
    const res = await service.http
      .patch(`/tasks/${task.id}`)
      .set('Authorization', alice.auth)
      .send({ title: '  renamed  ' })
      .expect(200);
    const patched = TaskSchema.parse(res.body);
    expect(patched).toEqual({ ...task, title: 'renamed', version: 2, updatedAt: patched.updatedAt });
  });

  it('clears dueAt and assigneeId with null', async () => {
    const task = await createTask(service, alice, { dueAt: '2027-01-01T00:00:00Z', assigneeId: bob.user.id });
    const res = await service.http
      .patch(`/tasks/${task.id}`)
      .set('Authorization', alice.auth)
      .send({ dueAt: null, assigneeId: null })
      .expect(200);
    expect(TaskSchema.parse(res.body)).toMatchObject({ dueAt: null, assigneeId: null, version: 2, title: task.title });
  });

  it('clears the description with null (merge patch), as an empty string', async () => {
    const task = await createTask(service, alice, { description: 'Some words' });
    for (const type of ['application/json', 'application/merge-patch+json']) {
      const res = await service.http
        .patch(`/tasks/${task.id}`)
        .set('Authorization', alice.auth)
        .set('Content-Type', type)
        .send(JSON.stringify({ description: null }))
        .expect(200);
      expect(TaskSchema.parse(res.body)).toMatchObject({ description: '', title: task.title });
    }
    expect(await getTask(service, alice, task.id)).toMatchObject({ description: '' });
  });

  it.each([
    ['a null title', { title: null }, 'body.title'],
    ['a null status', { status: null }, 'body.status'],
    ['a null priority', { priority: null }, 'body.priority'],
    ['a whitespace-only title', { title: ' ' }, 'body.title'],
    ['a bad dueAt', { dueAt: 'soon' }, 'body.dueAt'],
    ['a server-owned field', { ownerId: randomUUID() }, 'body'],
    ['an unknown assignee', { assigneeId: randomUUID() }, 'body.assigneeId'],
  ])('rejects %s with 400 and changes nothing', async (_name, body, path) => {
    const task = await createTask(service, alice);
    const res = await service.http.patch(`/tasks/${task.id}`).set('Authorization', alice.auth).send(body);
    expectProblem(res, 400, 'validation_failed');
    expect(errorPaths(res.body)).toContain(path);
    expect(await getTask(service, alice, task.id)).toEqual(task);
  });

  it('sets completedAt on done, keeps it on done → done, clears it on leaving done', async () => {
    const task = await createTask(service, alice);
    const done = TaskSchema.parse(
      (
        await service.http
          .patch(`/tasks/${task.id}`)
          .set('Authorization', alice.auth)
          .send({ status: 'done' })
          .expect(200)
      ).body,
    );
    expect(done.completedAt).not.toBeNull();
    expect(done.completedAt).toBe(done.updatedAt);

    // A change to another field while done, then an explicit done → done: completedAt stays.
    const edited = TaskSchema.parse(
      (
        await service.http
          .patch(`/tasks/${task.id}`)
          .set('Authorization', alice.auth)
          .send({ status: 'done', title: 'edited' })
          .expect(200)
      ).body,
    );
    expect(edited.version).toBe(done.version + 1);
    expect(edited.completedAt).toBe(done.completedAt);

    const reopened = TaskSchema.parse(
      (
        await service.http
          .patch(`/tasks/${task.id}`)
          .set('Authorization', alice.auth)
          .send({ status: 'todo' })
          .expect(200)
      ).body,
    );
    expect(reopened.completedAt).toBeNull();

    const doneAgain = TaskSchema.parse(
      (
        await service.http
          .patch(`/tasks/${task.id}`)
          .set('Authorization', alice.auth)
          .send({ status: 'done' })
          .expect(200)
      ).body,
    );
    expect(doneAgain.completedAt).not.toBeNull();
    const inProgress = TaskSchema.parse(
      (
        await service.http
          .patch(`/tasks/${task.id}`)
          .set('Authorization', alice.auth)
          .send({ status: 'in_progress' })
          .expect(200)
      ).body,
    );
    expect(inProgress.completedAt).toBeNull();
  });

  it('keeps the version for a no-op patch', async () => {
    const task = await createTask(service, alice, { priority: 'high', dueAt: '2027-01-01T00:00:00.000Z' });
    for (const body of [
      {},
      { priority: 'high' },
      { title: task.title, dueAt: '2027-01-01T02:00:00+02:00', assigneeId: null },
    ]) {
      const res = await service.http.patch(`/tasks/${task.id}`).set('Authorization', alice.auth).send(body).expect(200);
      expect(res.headers['etag']).toBe('"1"');
      expect(TaskSchema.parse(res.body)).toEqual(task);
    }
  });

  it('answers 412 for a stale If-Match and 200 for the current one', async () => {
    const task = await createTask(service, alice);
    await service.http
      .patch(`/tasks/${task.id}`)
      .set('Authorization', alice.auth)
      .set('If-Match', '"1"')
      .send({ title: 'v2' })
      .expect(200);
    const stale = await service.http
      .patch(`/tasks/${task.id}`)
      .set('Authorization', alice.auth)
      .set('If-Match', '"1"')
      .send({ title: 'lost' });
    expectProblem(stale, 412, 'precondition_failed');
    expect(stale.headers['etag']).toBe('"2"');
    expect((await getTask(service, alice, task.id)).title).toBe('v2');
    // If-Match compares strongly (RFC 9110 §13.1.1): a weak tag never matches.
    expectProblem(
      await service.http
        .patch(`/tasks/${task.id}`)
        .set('Authorization', alice.auth)
        .set('If-Match', 'W/"2"')
        .send({ title: 'weak' }),
      412,
      'precondition_failed',
    );
    const listed = await service.http
      .patch(`/tasks/${task.id}`)
      .set('Authorization', alice.auth)
      .set('If-Match', '"7", "2"')
      .send({ title: 'v3' })
      .expect(200);
    expect(listed.headers['etag']).toBe('"3"');
    await service.http
      .patch(`/tasks/${task.id}`)
      .set('Authorization', alice.auth)
      .set('If-Match', '*')
      .send({ title: 'v4' })
      .expect(200);
    expect((await getTask(service, alice, task.id)).version).toBe(4);
  });

  it('never loses one of two concurrent patches', async () => {
    const task = await createTask(service, alice);
    await Promise.all([
      service.http
        .patch(`/tasks/${task.id}`)
        .set('Authorization', alice.auth)
        .send({ title: 'concurrent title' })
        .expect(200),
      service.http.patch(`/tasks/${task.id}`).set('Authorization', alice.auth).send({ priority: 'urgent' }).expect(200),
    ]);
    expect(await getTask(service, alice, task.id)).toMatchObject({
      title: 'concurrent title',
      priority: 'urgent',
      version: 3,
    });
  });
});

describe('If-Match forms', () => {
  it('answers 400 with a hint for an unquoted ETag, and changes nothing', async () => {
    const task = await createTask(service, alice);
    for (const [method, body] of [
      ['patch', { title: 'x' }],
      ['put', { title: 'x', description: '', status: 'todo', priority: 'low', dueAt: null, assigneeId: null }],
      ['delete', undefined],
    ] as const) {
      const req = service.http[method](`/tasks/${task.id}`).set('Authorization', alice.auth).set('If-Match', '1');
      const problem = expectProblem(await (body ? req.send(body) : req), 400, 'validation_failed');
      expect(problem.errors?.[0]?.path).toBe('header.if-match');
      expect(problem.errors?.[0]?.message).toContain('in quotes');
    }
    expect(await getTask(service, alice, task.id)).toEqual(task);
  });

  it('takes *, quoted, weak and listed ETags', async () => {
    const task = await createTask(service, alice);
    await service.http
      .patch(`/tasks/${task.id}`)
      .set('Authorization', alice.auth)
      .set('If-Match', '*')
      .send({ title: 'star' })
      .expect(200);
    await service.http
      .patch(`/tasks/${task.id}`)
      .set('Authorization', alice.auth)
      .set('If-Match', 'W/"2", "9"')
      .send({ title: 'listed' })
      .expect(412);
    await service.http
      .patch(`/tasks/${task.id}`)
      .set('Authorization', alice.auth)
      .set('If-Match', '"9" , "2"')
      .send({ title: 'listed' })
      .expect(200);
    await service.http.delete(`/tasks/${task.id}`).set('Authorization', alice.auth).set('If-Match', '*').expect(204);
  });
});

describe('who may change the assignee', () => {
  it('lets the owner and an admin reassign', async () => {
    const task = await createTask(service, alice, { assigneeId: bob.user.id });
    await service.http
      .patch(`/tasks/${task.id}`)
      .set('Authorization', alice.auth)
      .send({ assigneeId: carol.user.id })
      .expect(200);
    const res = await service.http
      .patch(`/tasks/${task.id}`)
      .set('Authorization', admin.auth)
      .send({ assigneeId: bob.user.id })
      .expect(200);
    expect(TaskSchema.parse(res.body).assigneeId).toBe(bob.user.id);
  });

  it('forbids the assignee to hand the task to anyone else (403), by PATCH or PUT, and changes nothing', async () => {
    const task = await createTask(service, alice, { assigneeId: bob.user.id });
    expectProblem(
      await service.http.patch(`/tasks/${task.id}`).set('Authorization', bob.auth).send({ assigneeId: carol.user.id }),
      403,
      'forbidden',
    );
    const full = { title: 'kept', description: '', status: 'todo', priority: 'low', dueAt: null };
    expectProblem(
      await service.http
        .put(`/tasks/${task.id}`)
        .set('Authorization', bob.auth)
        .send({ ...full, assigneeId: carol.user.id }),
      403,
      'forbidden',
    );
    expectProblem(
      await service.http
        .patch(`/tasks/${task.id}`)
        .set('Authorization', bob.auth)
        .send({ title: 'and this', assigneeId: carol.user.id }),
      403,
      'forbidden',
    );
    expect(await getTask(service, alice, task.id)).toEqual(task);
    expectProblem(await service.http.get(`/tasks/${task.id}`).set('Authorization', carol.auth), 404, 'not_found');
    // Sending the assignee unchanged is no change of assignee.
    await service.http
      .put(`/tasks/${task.id}`)
      .set('Authorization', bob.auth)
      .send({ ...full, assigneeId: bob.user.id })
      .expect(200);
  });

  it('lets the assignee hand the task back (null), after which they no longer see it', async () => {
    const task = await createTask(service, alice, { assigneeId: bob.user.id });
    const res = await service.http
      .patch(`/tasks/${task.id}`)
      .set('Authorization', bob.auth)
      .send({ assigneeId: null })
      .expect(200);
    expect(TaskSchema.parse(res.body)).toMatchObject({ assigneeId: null, version: 2 });
    expectProblem(await service.http.get(`/tasks/${task.id}`).set('Authorization', bob.auth), 404, 'not_found');
  });
});

describe('DELETE /tasks/{id}', () => {
  it('lets the owner delete (204, no body), then the task is 404', async () => {
    const task = await createTask(service, alice);
    const res = await service.http.delete(`/tasks/${task.id}`).set('Authorization', alice.auth).expect(204);
    expect(res.text).toBeFalsy();
    expectProblem(await service.http.get(`/tasks/${task.id}`).set('Authorization', alice.auth), 404, 'not_found');
    expectProblem(await service.http.delete(`/tasks/${task.id}`).set('Authorization', alice.auth), 404, 'not_found');
  });

  it('lets the assignee read and update but not delete (403)', async () => {
    const task = await createTask(service, alice, { assigneeId: bob.user.id });
    expect(await getTask(service, bob, task.id)).toEqual(task);
    const res = await service.http
      .patch(`/tasks/${task.id}`)
      .set('Authorization', bob.auth)
      .send({ status: 'in_progress' })
      .expect(200);
    expect(TaskSchema.parse(res.body)).toMatchObject({ status: 'in_progress', ownerId: alice.user.id, version: 2 });
    expectProblem(await service.http.delete(`/tasks/${task.id}`).set('Authorization', bob.auth), 403, 'forbidden');
    expect((await getTask(service, alice, task.id)).version).toBe(2);
  });

  it("lets an admin delete anyone's task", async () => {
    const task = await createTask(service, alice);
    await service.http.delete(`/tasks/${task.id}`).set('Authorization', admin.auth).expect(204);
    expectProblem(await service.http.get(`/tasks/${task.id}`).set('Authorization', alice.auth), 404, 'not_found');
  });

  it('answers 412 for a stale If-Match and deletes with the current one', async () => {
    const task = await createTask(service, alice);
    await service.http.patch(`/tasks/${task.id}`).set('Authorization', alice.auth).send({ title: 'v2' }).expect(200);
    expectProblem(
      await service.http.delete(`/tasks/${task.id}`).set('Authorization', alice.auth).set('If-Match', '"1"'),
      412,
      'precondition_failed',
    );
    expect((await getTask(service, alice, task.id)).version).toBe(2);
    await service.http.delete(`/tasks/${task.id}`).set('Authorization', alice.auth).set('If-Match', '"2"').expect(204);
    expectProblem(await service.http.get(`/tasks/${task.id}`).set('Authorization', alice.auth), 404, 'not_found');
  });

  it('removes its tag links but not the tags', async () => {
    const tagId = randomUUID();
    await insertTags(service.ctx.db.sql, [{ id: tagId, ownerId: alice.user.id, name: 'doomed', color: '#123456' }]);
    const task = await createTask(service, alice, { tagIds: [tagId] });
    expect(task.tags).toEqual([{ id: tagId, name: 'doomed', color: '#123456' }]);
    await service.http.delete(`/tasks/${task.id}`).set('Authorization', alice.auth).expect(204);
    expect(await countOf(service.ctx.db.sql, tables.selectFrom('task_tags').where('task_id', '=', task.id))).toBe(0);
    expect(await countOf(service.ctx.db.sql, tables.selectFrom('tags').where('id', '=', tagId))).toBe(1);
  });

  it('answers 400 for a malformed id', async () => {
    expectProblem(await service.http.delete('/tasks/123').set('Authorization', alice.auth), 400, 'validation_failed');
  });
});

describe('visibility in GET /tasks', () => {
  it('shows a task to its owner and assignee, not to a third user', async () => {
    const task = await createTask(service, alice, { title: 'shared with bob', assigneeId: bob.user.id });
    expect((await listAll(alice)).map((t) => t.id)).toContain(task.id);
    expect((await listAll(bob)).map((t) => t.id)).toContain(task.id);
    expect((await listAll(carol)).map((t) => t.id)).not.toContain(task.id);
    expectProblem(await service.http.get(`/tasks/${task.id}`).set('Authorization', carol.auth), 404, 'not_found');
  });

  it('lists exactly what a user owns or is assigned', async () => {
    const own = await createTask(service, carol, { title: 'carol own' });
    const assigned = await createTask(service, bob, { title: 'for carol', assigneeId: carol.user.id });
    expect((await listAll(carol)).map((t) => t.id).sort()).toEqual([own.id, assigned.id].sort());
  });

  it('stops showing a task to a former assignee', async () => {
    const task = await createTask(service, alice, { assigneeId: carol.user.id });
    await service.http
      .patch(`/tasks/${task.id}`)
      .set('Authorization', alice.auth)
      .send({ assigneeId: null })
      .expect(200);
    expect((await listAll(carol)).map((t) => t.id)).not.toContain(task.id);
    expectProblem(await service.http.get(`/tasks/${task.id}`).set('Authorization', carol.auth), 404, 'not_found');
  });

  it('ignores ownerId for a non-admin: they still see only their own tasks', async () => {
    const hidden = await createTask(service, alice, { title: 'alice only' });
    const assigned = await createTask(service, alice, { title: 'alice for bob', assigneeId: bob.user.id });
    const ids = (await listAll(bob, `&ownerId=${alice.user.id}`)).map((t) => t.id);
    expect(ids).toContain(assigned.id);
    expect(ids).not.toContain(hidden.id);
  });
});

describe('admin', () => {
  it("sees every user's tasks in GET /tasks and filters them by ownerId", async () => {
    const a = await createTask(service, alice, { title: 'admin sees alice' });
    const b = await createTask(service, bob, { title: 'admin sees bob' });
    const all = (await listAll(admin)).map((t) => t.id);
    expect(all).toEqual(expect.arrayContaining([a.id, b.id]));
    expect(all).toHaveLength(await countTasks(service.ctx.db.sql));

    const bobs = await listAll(admin, `&ownerId=${bob.user.id}`);
    expect(bobs.map((t) => t.id)).toContain(b.id);
    expect(bobs.every((t) => t.ownerId === bob.user.id)).toBe(true);
    expect(bobs).toHaveLength(await countOwned(service.ctx.db.sql, 'tasks', bob.user.id));
  });

  it("reads and changes anyone's task", async () => {
    const task = await createTask(service, bob);
    expect(await getTask(service, admin, task.id)).toEqual(task);
    const res = await service.http
      .patch(`/tasks/${task.id}`)
      .set('Authorization', admin.auth)
      .send({ priority: 'urgent' })
      .expect(200);
    expect(TaskSchema.parse(res.body)).toMatchObject({ priority: 'urgent', ownerId: bob.user.id });
  });

  it('rejects a malformed ownerId with 400', async () => {
    expectProblem(
      await service.http.get('/tasks?ownerId=bob').set('Authorization', admin.auth),
      400,
      'validation_failed',
    );
  });
});
