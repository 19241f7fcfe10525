// Per-user quotas (found by an attack: one account stored 300 MiB in 10 s). Attacked with parallel
// requests, so a quota that a race could pass would show here.
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import { rawQuery, tables } from '../server/db/query.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serviceForFile, startService, type TestService } from './support/app.js';
import { expectProblem } from './support/problems.js';
import { countOf, countOwned, insertTags } from './support/rows.js';
import { createTask } from './support/tasks.js';
import { registerAdmin, registerUser, type TestUser } from './support/users.js';

const MAX_TASKS = 5;
const MAX_TAGS = 3;
const STORAGE_BYTES = 10_000;

const service = serviceForFile({
  USER_MAX_TASKS: String(MAX_TASKS),
  USER_MAX_TAGS: String(MAX_TAGS),
  USER_STORAGE_QUOTA_BYTES: String(STORAGE_BYTES),
});

/** The server's max_connections, as SHOW gives it (text). */
const maxConnections = rawQuery(sql<{ max_connections: string }>`SHOW max_connections`);
const statuses = (responses: { status: number }[]) => responses.map((r) => r.status).sort();
const createTaskRequest = (user: TestUser, title: string) =>
  service.http.post('/tasks').set('Authorization', user.auth).send({ title });
const upload = (user: TestUser, taskId: string, size: number) =>
  service.http
    .post(`/tasks/${taskId}/attachments`)
    .set('Authorization', user.auth)
    .attach('file', Buffer.alloc(size, 7), { filename: 'blob.bin', contentType: 'application/octet-stream' });
const storedFiles = async () => (await readdir(path.join(service.ctx.config.dataDir, 'attachments', 'objects'))).length;

describe('the task quota', () => {
  it('lets exactly USER_MAX_TASKS of many parallel creates through, and the rest are 409 quota_exceeded', async () => {
    const user = await registerUser(service);
    const responses = await Promise.all(
      Array.from({ length: 4 * MAX_TASKS }, (_, i) => createTaskRequest(user, `parallel ${i}`)),
    );
    expect(statuses(responses).filter((s) => s === 201)).toHaveLength(MAX_TASKS);
    const refused = responses.filter((r) => r.status !== 201);
    for (const res of refused)
      expect(expectProblem(res, 409, 'quota_exceeded', '/tasks').detail).toContain('USER_MAX_TASKS');
    expect(await countOwned(service.ctx.db.sql, 'tasks', user.user.id)).toBe(MAX_TASKS);
  });

  it('has room again once a task is deleted; other users and admins are not affected', async () => {
    const user = await registerUser(service);
    const tasks = await Promise.all(
      Array.from({ length: MAX_TASKS }, (_, i) => createTask(service, user, { title: `t${i}` })),
    );
    expectProblem(await createTaskRequest(user, 'one more'), 409, 'quota_exceeded');
    await service.http.delete(`/tasks/${tasks[0]?.id}`).set('Authorization', user.auth).expect(204);
    await createTaskRequest(user, 'fits again').expect(201);

    await createTaskRequest(await registerUser(service), 'someone else').expect(201);
    const admin = await registerAdmin(service);
    const byAdmin = await Promise.all(
      Array.from({ length: MAX_TASKS + 2 }, (_, i) => createTaskRequest(admin, `admin ${i}`)),
    );
    expect(statuses(byAdmin).every((s) => s === 201)).toBe(true);
  });
});

describe('the task quota far from its limit', () => {
  // Far from the limit one user's creates share the user's row instead of queueing on it; that is
  // safe only with room left for every transaction the server can run at once (max_connections).
  let roomy: TestService;
  let connections: number;
  beforeAll(async () => {
    const setting = await service.ctx.db.sql.first(maxConnections);
    connections = Number(setting?.max_connections);
    roomy = await startService({ USER_MAX_TASKS: String(connections + 40) });
  });
  afterAll(() => roomy.close());

  it('lets exactly the quota through when parallel creates cross from the shared region into the margin', async () => {
    const user = await registerUser(roomy);
    const seeded = 30;
    await roomy.ctx.db.sql.write(
      tables.insertInto('tasks').values(
        Array.from({ length: seeded }, (_, i) => ({
          id: uuidv7(),
          owner_id: user.user.id,
          title: `seeded ${i}`,
          updated_at: new Date(),
        })),
      ),
    );
    const room = connections + 40 - seeded;
    const responses = await Promise.all(
      Array.from({ length: room + 30 }, (_, i) =>
        roomy.http
          .post('/tasks')
          .set('Authorization', user.auth)
          .send({ title: `parallel ${i}` }),
      ),
    );
    expect(statuses(responses).filter((s) => s === 201)).toHaveLength(room);
    for (const res of responses.filter((r) => r.status !== 201)) expectProblem(res, 409, 'quota_exceeded');
    expect(await countOwned(roomy.ctx.db.sql, 'tasks', user.user.id)).toBe(connections + 40);
  }, 60_000);
});

describe('the tag quota', () => {
  it('lets exactly USER_MAX_TAGS of many parallel creates through', async () => {
    const user = await registerUser(service);
    const responses = await Promise.all(
      Array.from({ length: 4 * MAX_TAGS }, (_, i) =>
        service.http
          .post('/tags')
          .set('Authorization', user.auth)
          .send({ name: `tag ${i}` }),
      ),
    );
    expect(statuses(responses).filter((s) => s === 201)).toHaveLength(MAX_TAGS);
    for (const res of responses.filter((r) => r.status !== 201))
      expect(expectProblem(res, 409, 'quota_exceeded', '/tags').detail).toContain('USER_MAX_TAGS');
    expect(await countOwned(service.ctx.db.sql, 'tags', user.user.id)).toBe(MAX_TAGS);
  });
});

describe('the tag quota one below its limit', () => {
  const oneBelow = async (target: TestService, limit: number) => {
    const user = await registerUser(target);
    await insertTags(
      target.ctx.db.sql,
      Array.from({ length: limit - 1 }, (_, i) => ({
        id: uuidv7(),
        ownerId: user.user.id,
        name: `seeded ${i}`,
        color: '#000000',
      })),
    );
    const responses = await Promise.all(
      Array.from({ length: 32 }, (_, i) =>
        target.http
          .post('/tags')
          .set('Authorization', user.auth)
          .send({ name: `last ${i}` }),
      ),
    );
    expect(statuses(responses).filter((s) => s === 201)).toHaveLength(1);
    for (const res of responses.filter((r) => r.status !== 201))
      expect(expectProblem(res, 409, 'quota_exceeded', '/tags').detail).toContain('USER_MAX_TAGS');
    expect(await countOwned(target.ctx.db.sql, 'tags', user.user.id)).toBe(limit);
  };

  it('lets exactly one of 32 parallel creates through', () => oneBelow(service, MAX_TAGS));

  it('lets exactly one through where a create first tries the shared claim (a limit above max_connections)', async () => {
    const setting = await service.ctx.db.sql.first(maxConnections);
    const limit = Number(setting?.max_connections) + 40;
    const roomy = await startService({ USER_MAX_TAGS: String(limit) });
    try {
      await oneBelow(roomy, limit);
    } finally {
      await roomy.close();
    }
  }, 60_000);
});

describe('the storage quota', () => {
  it('refuses the upload that would pass USER_STORAGE_QUOTA_BYTES, keeping neither its row nor its bytes', async () => {
    const user = await registerUser(service);
    const task = await createTask(service, user);
    await upload(user, task.id, 4_000).expect(201);
    await upload(user, task.id, 4_000).expect(201);
    const files = await storedFiles();
    const res = await upload(user, task.id, 4_000);
    expect(expectProblem(res, 409, 'quota_exceeded').detail).toContain('USER_STORAGE_QUOTA_BYTES');
    expect(
      await countOf(service.ctx.db.sql, tables.selectFrom('attachments').where('uploaded_by', '=', user.user.id)),
    ).toBe(2);
    expect(await storedFiles()).toBe(files);
    await upload(user, task.id, 1_000).expect(201); // what still fits
  });

  it('holds under parallel uploads', async () => {
    const user = await registerUser(service);
    const task = await createTask(service, user);
    const responses = await Promise.all(Array.from({ length: 8 }, () => upload(user, task.id, 3_000)));
    expect(statuses(responses).filter((s) => s === 201)).toHaveLength(3);
    for (const res of responses.filter((r) => r.status !== 201)) expectProblem(res, 409, 'quota_exceeded');
    const used = await service.ctx.db.sql.first(
      tables
        .selectFrom('attachments')
        .select((eb) => eb.fn.sum<string | null>('size').as('size'))
        .where('uploaded_by', '=', user.user.id),
    );
    expect(Number(used?.size)).toBe(9_000);
  });
});
