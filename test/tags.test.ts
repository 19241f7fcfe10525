import { v7 as uuidv7 } from 'uuid';
import { beforeAll, describe, expect, it } from 'vitest';
import { listOf, pageOf } from '../contract/common.js';
import { TagSchema, type Tag } from '../contract/tags.js';
import { tables } from '../server/db/query.js';
import { TaskSchema } from '../contract/tasks.js';
import { serviceForFile } from './support/app.js';
import { registerUser, type TestUser, userForFile } from './support/users.js';
import { errorPaths, expectProblem } from './support/problems.js';
import { countOf } from './support/rows.js';
import { createTask, getTask } from './support/tasks.js';

const TagPageSchema = pageOf(TagSchema);
const TagListSchema = listOf(TagSchema);
const TaskPageSchema = pageOf(TaskSchema);

const service = serviceForFile();
const alice = userForFile(service, { name: 'Alice' });
const bob = userForFile(service, { name: 'Bob' });
const admin = userForFile(service, { admin: true });

let tagCount = 0;
/** A tag name no other test uses. */
const freshName = (prefix = 'tag') => `${prefix}-${++tagCount}`;

async function createTag(user: TestUser, body: Record<string, unknown> = {}): Promise<Tag> {
  const res = await service.http
    .post('/tags')
    .set('Authorization', user.auth)
    .send({ name: freshName(), ...body })
    .expect(201);
  return TagSchema.parse(res.body);
}

const linkTag = (user: TestUser, taskId: string, tagId: string) =>
  service.http.post(`/tasks/${taskId}/tags/${tagId}`).set('Authorization', user.auth);

/** Moves a task's updatedAt into the past, so that a bump is visible whatever the clock does. */
const PAST = new Date('2020-01-01T00:00:00.000Z');
async function ageTask(taskId: string): Promise<void> {
  await service.ctx.db.sql.write(tables.updateTable('tasks').set({ updated_at: PAST }).where('id', '=', taskId));
}

describe('POST /tags', () => {
  it('creates a tag with a trimmed name and a lower-cased colour, with Location', async () => {
    const res = await service.http
      .post('/tags')
      .set('Authorization', alice.auth)
      .send({ name: '  Urgent stuff ', color: '#AbCdEf' })
      .expect(201);
    const tag = TagSchema.parse(res.body);
    expect(tag).toMatchObject({ ownerId: alice.user.id, name: 'Urgent stuff', color: '#abcdef' });
    expect(tag.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(res.headers.location).toBe(`/tags/${tag.id}`);
    const read = await service.http.get(`/tags/${tag.id}`).set('Authorization', alice.auth).expect(200);
    expect(TagSchema.parse(read.body)).toEqual(tag);
  });

  it('picks a default colour from the name, the same for the same name', async () => {
    const name = freshName('palette');
    const [mine, theirs] = await Promise.all([
      createTag(alice, { name }),
      createTag(bob, { name: name.toUpperCase() }),
    ]);
    expect(mine.color).toMatch(/^#[0-9a-f]{6}$/);
    expect(theirs.color).toBe(mine.color);
  });

  it('answers 409 tag_name_taken for a name the owner already has, ignoring case', async () => {
    const tag = await createTag(alice, { name: freshName('Work') });
    const res = await service.http
      .post('/tags')
      .set('Authorization', alice.auth)
      .send({ name: ` ${tag.name.toLowerCase()} ` });
    expectProblem(res, 409, 'tag_name_taken');
    // Another user may use the same name.
    await createTag(bob, { name: tag.name });
  });

  it.each([
    ['a colour that is not #rrggbb', { name: 'x', color: 'red' }, 'body.color'],
    ['a short colour', { name: 'x', color: '#12345' }, 'body.color'],
    ['a colour with non-hex digits', { name: 'x', color: '#ggg000' }, 'body.color'],
    ['a null colour', { name: 'x', color: null }, 'body.color'],
    ['a blank name', { name: '   ' }, 'body.name'],
    ['a name of 51 characters', { name: 'n'.repeat(51) }, 'body.name'],
    ['no name', { color: '#000000' }, 'body.name'],
    ['a server-owned field', { name: 'x', ownerId: uuidv7() }, 'body'],
  ])('rejects %s with 400', async (_case, body, path) => {
    const res = await service.http.post('/tags').set('Authorization', alice.auth).send(body);
    expectProblem(res, 400, 'validation_failed');
    expect(errorPaths(res.body)).toEqual([path]);
  });

  it('accepts a name of 50 characters after trimming', async () => {
    const name = `${freshName()}-`.padEnd(50, 'x');
    const tag = await createTag(alice, { name: `  ${name}  ` });
    expect(tag.name).toBe(name);
  });

  it('answers 401 with WWW-Authenticate without a token, and creates nothing', async () => {
    const name = freshName('anonymous');
    const res = await service.http.post('/tags').send({ name });
    expectProblem(res, 401, 'unauthenticated');
    expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
    expect(await countOf(service.ctx.db.sql, tables.selectFrom('tags').where('name', '=', name))).toBe(0);
  });
});

describe('GET /tags', () => {
  let carol: TestUser;
  let carolTags: Tag[];
  beforeAll(async () => {
    carol = await registerUser(service, { name: 'Carol' });
    carolTags = [];
    for (const name of ['Home', 'homework', 'Garden', 'shopping', 'HOMESTEAD'])
      carolTags.push(await createTag(carol, { name }));
  });

  it("lists only the caller's tags, oldest first", async () => {
    const res = await service.http.get('/tags?limit=100').set('Authorization', carol.auth).expect(200);
    const page = TagPageSchema.parse(res.body);
    expect(page.items).toEqual(carolTags);
    expect(page.nextCursor).toBeNull();
    expect(res.headers.link).toBeUndefined();
  });

  it('walks pages with the cursor and the Link header', async () => {
    const seen: Tag[] = [];
    let url: string | undefined = '/tags?limit=2';
    let pages = 0;
    while (url) {
      const res = await service.http.get(url).set('Authorization', carol.auth).expect(200);
      const page = TagPageSchema.parse(res.body);
      seen.push(...page.items);
      pages++;
      if (page.nextCursor) {
        expect(res.headers.link).toBe(`</tags?limit=2&cursor=${page.nextCursor}>; rel="next"`);
        url = `/tags?limit=2&cursor=${page.nextCursor}`;
      } else {
        url = undefined;
      }
    }
    expect(pages).toBe(3);
    expect(seen).toEqual(carolTags);
  });

  it('filters by a case-insensitive substring of the name', async () => {
    const res = await service.http.get('/tags?q=HoMe').set('Authorization', carol.auth).expect(200);
    expect(TagPageSchema.parse(res.body).items.map((t) => t.name)).toEqual(['Home', 'homework', 'HOMESTEAD']);
  });

  it('matches % and _ in q literally', async () => {
    const dave = await registerUser(service, { name: 'Dave' });
    for (const name of ['100%', '1000', 'a_b', 'axb']) await createTag(dave, { name });
    const percent = await service.http.get('/tags?q=0%25').set('Authorization', dave.auth).expect(200);
    expect(TagPageSchema.parse(percent.body).items.map((t) => t.name)).toEqual(['100%']);
    const underscore = await service.http.get('/tags?q=a_').set('Authorization', dave.auth).expect(200);
    expect(TagPageSchema.parse(underscore.body).items.map((t) => t.name)).toEqual(['a_b']);
  });

  it("shows a user nothing of another user's tags, even when they ask by ownerId", async () => {
    const res = await service.http.get(`/tags?ownerId=${carol.user.id}`).set('Authorization', alice.auth).expect(200);
    expect(TagPageSchema.parse(res.body).items).toEqual([]);
  });

  it('shows an admin every tag, optionally those of one owner', async () => {
    const all = await service.http.get('/tags?limit=100').set('Authorization', admin.auth).expect(200);
    const owners = new Set(TagPageSchema.parse(all.body).items.map((t) => t.ownerId));
    for (const owner of [alice, bob, carol]) expect(owners.has(owner.user.id)).toBe(true);
    const one = await service.http
      .get(`/tags?limit=100&ownerId=${carol.user.id}&q=home`)
      .set('Authorization', admin.auth)
      .expect(200);
    expect(TagPageSchema.parse(one.body).items).toEqual(carolTags.filter((t) => t.name.toLowerCase().includes('home')));
  });

  it.each([
    ['a forged cursor', '?cursor=bm90LWEtY3Vyc29y', 'query.cursor'],
    ['a limit over 100', '?limit=101', 'query.limit'],
    ['an empty q', '?q=', 'query.q'],
    ['an unknown parameter', '?sort=name', 'query'],
  ])('rejects %s with 400', async (_case, query, path) => {
    const res = await service.http.get(`/tags${query}`).set('Authorization', carol.auth);
    expectProblem(res, 400, 'validation_failed');
    expect(errorPaths(res.body)).toEqual([path]);
  });

  it('answers 401 without a token', async () => {
    expectProblem(await service.http.get('/tags'), 401, 'unauthenticated');
  });
});

describe('GET, PATCH and DELETE /tags/{tag_id}', () => {
  it("answers 404 for another user's tag, for every method, and changes nothing", async () => {
    const tag = await createTag(alice);
    expectProblem(await service.http.get(`/tags/${tag.id}`).set('Authorization', bob.auth), 404, 'not_found');
    expectProblem(
      await service.http.patch(`/tags/${tag.id}`).set('Authorization', bob.auth).send({ name: 'stolen' }),
      404,
      'not_found',
    );
    expectProblem(await service.http.delete(`/tags/${tag.id}`).set('Authorization', bob.auth), 404, 'not_found');
    const read = await service.http.get(`/tags/${tag.id}`).set('Authorization', alice.auth).expect(200);
    expect(TagSchema.parse(read.body)).toEqual(tag);
  });

  it('answers 404 for an unknown id and 400 for a malformed one', async () => {
    expectProblem(await service.http.get(`/tags/${uuidv7()}`).set('Authorization', alice.auth), 404, 'not_found');
    expectProblem(
      await service.http.patch(`/tags/${uuidv7()}`).set('Authorization', alice.auth).send({ name: 'x' }),
      404,
      'not_found',
    );
    expectProblem(await service.http.delete(`/tags/${uuidv7()}`).set('Authorization', alice.auth), 404, 'not_found');
    const res = await service.http.get('/tags/not-a-uuid').set('Authorization', alice.auth);
    expectProblem(res, 400, 'validation_failed');
    expect(errorPaths(res.body)).toEqual(['path.tag_id']);
  });

  it('renames and recolours', async () => {
    const tag = await createTag(alice, { color: '#000000' });
    const renamed = await service.http
      .patch(`/tags/${tag.id}`)
      .set('Authorization', alice.auth)
      .send({ name: ' Renamed one ' })
      .expect(200);
    expect(TagSchema.parse(renamed.body)).toEqual({ ...tag, name: 'Renamed one' });
    const recoloured = await service.http
      .patch(`/tags/${tag.id}`)
      .set('Authorization', alice.auth)
      .send({ color: '#FF8800' })
      .expect(200);
    expect(TagSchema.parse(recoloured.body)).toEqual({ ...tag, name: 'Renamed one', color: '#ff8800' });
    const unchanged = await service.http.patch(`/tags/${tag.id}`).set('Authorization', alice.auth).send({}).expect(200);
    expect(TagSchema.parse(unchanged.body)).toEqual({ ...tag, name: 'Renamed one', color: '#ff8800' });
    // Changing only the case of its own name is no clash.
    const recased = await service.http
      .patch(`/tags/${tag.id}`)
      .set('Authorization', alice.auth)
      .send({ name: 'RENAMED ONE' })
      .expect(200);
    expect(TagSchema.parse(recased.body).name).toBe('RENAMED ONE');
  });

  it('gives the tasks carrying a renamed or recoloured tag a new version, and no-op patches none', async () => {
    const tag = await createTag(alice, { name: freshName('shown'), color: '#000000' });
    const carrier = await createTask(service, alice, { tagIds: [tag.id] });
    const bystander = await createTask(service, alice);
    const before = await getTask(service, alice, carrier.id);
    await service.http
      .patch(`/tags/${tag.id}`)
      .set('Authorization', alice.auth)
      .send({ name: 'Shown anew' })
      .expect(200);
    // getTask also checks that the ETag names the new version.
    const renamed = await getTask(service, alice, carrier.id);
    expect(renamed.version).toBe(before.version + 1);
    expect(renamed.tags.map((t) => t.name)).toEqual(['Shown anew']);
    await service.http.patch(`/tags/${tag.id}`).set('Authorization', alice.auth).send({ color: '#00ff00' }).expect(200);
    expect((await getTask(service, alice, carrier.id)).version).toBe(before.version + 2);
    await service.http
      .patch(`/tags/${tag.id}`)
      .set('Authorization', alice.auth)
      .send({ name: 'Shown anew', color: '#00FF00' })
      .expect(200);
    expect((await getTask(service, alice, carrier.id)).version).toBe(before.version + 2);
    expect((await getTask(service, alice, bystander.id)).version).toBe(bystander.version);
  });

  it("answers 409 when renaming onto another of the owner's names, ignoring case", async () => {
    const [first, second] = [await createTag(alice), await createTag(alice)];
    const res = await service.http
      .patch(`/tags/${second.id}`)
      .set('Authorization', alice.auth)
      .send({ name: first.name.toUpperCase() });
    expectProblem(res, 409, 'tag_name_taken');
    const read = await service.http.get(`/tags/${second.id}`).set('Authorization', alice.auth).expect(200);
    expect(TagSchema.parse(read.body)).toEqual(second);
  });

  it.each([
    ['a bad colour', { color: '#12' }, 'body.color'],
    ['a blank name', { name: '' }, 'body.name'],
    ['a name of 51 characters', { name: 'x'.repeat(51) }, 'body.name'],
    ['a server-owned field', { createdAt: '2026-01-01T00:00:00.000Z' }, 'body'],
  ])('rejects a patch with %s with 400', async (_case, body, path) => {
    const tag = await createTag(alice);
    const res = await service.http.patch(`/tags/${tag.id}`).set('Authorization', alice.auth).send(body);
    expectProblem(res, 400, 'validation_failed');
    expect(errorPaths(res.body)).toEqual([path]);
  });

  it("lets an admin read, change and delete a user's tag", async () => {
    const tag = await createTag(bob);
    const read = await service.http.get(`/tags/${tag.id}`).set('Authorization', admin.auth).expect(200);
    expect(TagSchema.parse(read.body)).toEqual(tag);
    const changed = await service.http
      .patch(`/tags/${tag.id}`)
      .set('Authorization', admin.auth)
      .send({ name: freshName('by-admin') })
      .expect(200);
    expect(TagSchema.parse(changed.body).ownerId).toBe(bob.user.id);
    await service.http.delete(`/tags/${tag.id}`).set('Authorization', admin.auth).expect(204);
    expectProblem(await service.http.get(`/tags/${tag.id}`).set('Authorization', bob.auth), 404, 'not_found');
  });

  it('deletes a tag, takes it off every task and bumps only those tasks', async () => {
    const [doomed, kept] = [
      await createTag(alice, { name: freshName('b') }),
      await createTag(alice, { name: freshName('a') }),
    ];
    const tagged = [
      await createTask(service, alice, { tagIds: [doomed.id, kept.id] }),
      await createTask(service, alice, { tagIds: [doomed.id] }),
    ];
    const untagged = await createTask(service, alice, { tagIds: [kept.id] });
    for (const task of [...tagged, untagged]) await ageTask(task.id);

    const res = await service.http.delete(`/tags/${doomed.id}`).set('Authorization', alice.auth).expect(204);
    expect(res.text).toBe('');

    for (const before of tagged) {
      const task = await getTask(service, alice, before.id);
      expect(task.version).toBe(before.version + 1);
      expect(Date.parse(task.updatedAt)).toBeGreaterThan(PAST.getTime());
      expect(task.tags.map((t) => t.id)).toEqual(before.tags.map((t) => t.id).filter((id) => id !== doomed.id));
    }
    const other = await getTask(service, alice, untagged.id);
    expect(other.version).toBe(untagged.version);
    expect(other.updatedAt).toBe(PAST.toISOString());
    expect(other.tags).toEqual([{ id: kept.id, name: kept.name, color: kept.color }]);

    expectProblem(await service.http.get(`/tags/${doomed.id}`).set('Authorization', alice.auth), 404, 'not_found');
    expectProblem(await service.http.delete(`/tags/${doomed.id}`).set('Authorization', alice.auth), 404, 'not_found');
  });

  it('answers 401 without a token', async () => {
    const tag = await createTag(alice);
    expectProblem(await service.http.get(`/tags/${tag.id}`), 401, 'unauthenticated');
    expectProblem(await service.http.patch(`/tags/${tag.id}`).send({ name: 'x' }), 401, 'unauthenticated');
    expectProblem(await service.http.delete(`/tags/${tag.id}`), 401, 'unauthenticated');
  });
});

describe('tags on tasks', () => {
  it('links a tag (201, Location, version bump), and again idempotently (200, no bump)', async () => {
    const tag = await createTag(alice);
    const before = await createTask(service, alice);
    await ageTask(before.id);

    const first = await linkTag(alice, before.id, tag.id).expect(201);
    expect(TagSchema.parse(first.body)).toEqual(tag);
    expect(first.headers.location).toBe(`/tasks/${before.id}/tags/${tag.id}`);
    const task = await getTask(service, alice, before.id);
    expect(task.version).toBe(2);
    expect(Date.parse(task.updatedAt)).toBeGreaterThan(PAST.getTime());
    expect(task.tags).toEqual([{ id: tag.id, name: tag.name, color: tag.color }]);

    await ageTask(before.id);
    const again = await linkTag(alice, before.id, tag.id).expect(200);
    expect(TagSchema.parse(again.body)).toEqual(tag);
    const after = await getTask(service, alice, before.id);
    expect(after.version).toBe(2);
    expect(after.updatedAt).toBe(PAST.toISOString());
  });

  it("lists a task's tags ordered by name, like the task's tags array", async () => {
    const names = ['beta', 'alpha', 'gamma'].map((n) => freshName(n));
    const tags: Tag[] = [];
    for (const name of names) tags.push(await createTag(alice, { name }));
    const task = await createTask(service, alice);
    for (const tag of tags) await linkTag(alice, task.id, tag.id).expect(201);

    const res = await service.http.get(`/tasks/${task.id}/tags`).set('Authorization', alice.auth).expect(200);
    const list = TagListSchema.parse(res.body);
    expect(list.items.map((t) => t.name)).toEqual([...names].sort());
    expect(list.items).toEqual([...tags].sort((a, b) => a.name.localeCompare(b.name)));
    const read = await getTask(service, alice, task.id);
    expect(read.tags.map((t) => t.name)).toEqual([...names].sort());
    expect(read.version).toBe(4);
  });

  it('unlinks a tag (204, version bump) and answers 404 when it is not on the task', async () => {
    const [on, off] = [await createTag(alice), await createTag(alice)];
    const before = await createTask(service, alice, { tagIds: [on.id] });
    await ageTask(before.id);

    await service.http.delete(`/tasks/${before.id}/tags/${on.id}`).set('Authorization', alice.auth).expect(204);
    const task = await getTask(service, alice, before.id);
    expect(task.version).toBe(before.version + 1);
    expect(Date.parse(task.updatedAt)).toBeGreaterThan(PAST.getTime());
    expect(task.tags).toEqual([]);

    expectProblem(
      await service.http.delete(`/tasks/${before.id}/tags/${on.id}`).set('Authorization', alice.auth),
      404,
      'not_found',
    );
    expectProblem(
      await service.http.delete(`/tasks/${before.id}/tags/${off.id}`).set('Authorization', alice.auth),
      404,
      'not_found',
    );
    expectProblem(
      await service.http.delete(`/tasks/${before.id}/tags/${uuidv7()}`).set('Authorization', alice.auth),
      404,
      'not_found',
    );
    expect((await getTask(service, alice, before.id)).version).toBe(before.version + 1);
  });

  it("answers 404 for another user's task, for every method", async () => {
    const tag = await createTag(alice);
    const task = await createTask(service, alice, { tagIds: [tag.id] });
    const bobTag = await createTag(bob);
    expectProblem(await service.http.get(`/tasks/${task.id}/tags`).set('Authorization', bob.auth), 404, 'not_found');
    expectProblem(await linkTag(bob, task.id, bobTag.id), 404, 'not_found');
    expectProblem(await linkTag(bob, task.id, tag.id), 404, 'not_found');
    expectProblem(
      await service.http.delete(`/tasks/${task.id}/tags/${tag.id}`).set('Authorization', bob.auth),
      404,
      'not_found',
    );
    const after = await getTask(service, alice, task.id);
    expect(after.version).toBe(task.version);
    expect(after.tags.map((t) => t.id)).toEqual([tag.id]);
  });

  it("answers 404 for a tag that is not the task owner's, even for an admin", async () => {
    const task = await createTask(service, alice);
    const [bobTag, adminTag] = [await createTag(bob), await createTag(admin)];
    expectProblem(await linkTag(alice, task.id, bobTag.id), 404, 'not_found');
    expectProblem(await linkTag(admin, task.id, adminTag.id), 404, 'not_found');
    expectProblem(await linkTag(alice, task.id, uuidv7()), 404, 'not_found');
    expect(await getTask(service, alice, task.id)).toEqual(task);
  });

  it("lets an admin read and change the tags of a user's task with the owner's tags", async () => {
    const tag = await createTag(alice);
    const task = await createTask(service, alice);
    await linkTag(admin, task.id, tag.id).expect(201);
    const res = await service.http.get(`/tasks/${task.id}/tags`).set('Authorization', admin.auth).expect(200);
    expect(TagListSchema.parse(res.body).items).toEqual([tag]);
    await service.http.delete(`/tasks/${task.id}/tags/${tag.id}`).set('Authorization', admin.auth).expect(204);
    expect((await getTask(service, alice, task.id)).version).toBe(3);
  });

  it("lets an assignee see the tags and use the owner's tags, not their own", async () => {
    const ownerTag = await createTag(alice);
    const bobTag = await createTag(bob);
    const task = await createTask(service, alice, { assigneeId: bob.user.id });
    await linkTag(bob, task.id, ownerTag.id).expect(201);
    expectProblem(await linkTag(bob, task.id, bobTag.id), 404, 'not_found');
    const res = await service.http.get(`/tasks/${task.id}/tags`).set('Authorization', bob.auth).expect(200);
    expect(TagListSchema.parse(res.body).items).toEqual([ownerTag]);
    // The tag itself stays the owner's: the assignee cannot read it directly.
    expectProblem(await service.http.get(`/tags/${ownerTag.id}`).set('Authorization', bob.auth), 404, 'not_found');
  });

  it('survives concurrent adds of the same tag: one 201, the rest 200, one version bump', async () => {
    const tag = await createTag(alice);
    const task = await createTask(service, alice);
    const responses = await Promise.all(Array.from({ length: 6 }, () => linkTag(alice, task.id, tag.id)));
    expect(responses.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 200, 201]);
    const after = await getTask(service, alice, task.id);
    expect(after.version).toBe(task.version + 1);
    expect(after.tags.map((t) => t.id)).toEqual([tag.id]);
  });

  it('rejects malformed ids with 400', async () => {
    const task = await createTask(service, alice);
    const res = await service.http.post(`/tasks/${task.id}/tags/nope`).set('Authorization', alice.auth);
    expectProblem(res, 400, 'validation_failed');
    expect(errorPaths(res.body)).toEqual(['path.tag_id']);
    const bad = await service.http.get('/tasks/nope/tags').set('Authorization', alice.auth);
    expectProblem(bad, 400, 'validation_failed');
    expect(errorPaths(bad.body)).toEqual(['path.task_id']);
  });

  it('answers 401 without a token', async () => {
    const tag = await createTag(alice);
    const task = await createTask(service, alice);
    expectProblem(await service.http.get(`/tasks/${task.id}/tags`), 401, 'unauthenticated');
    expectProblem(await service.http.post(`/tasks/${task.id}/tags/${tag.id}`), 401, 'unauthenticated');
    expectProblem(await service.http.delete(`/tasks/${task.id}/tags/${tag.id}`), 401, 'unauthenticated');
    expect(await getTask(service, alice, task.id)).toEqual(task);
  });

  it('filters GET /tasks by tags linked through this API: a task must carry every listed tag', async () => {
    const carol = await registerUser(service, { name: 'Carol' });
    const [red, blue] = [await createTag(carol), await createTag(carol)];
    const [both, redOnly] = [await createTask(service, carol), await createTask(service, carol)];
    await createTask(service, carol);
    await linkTag(carol, both.id, red.id).expect(201);
    await linkTag(carol, both.id, blue.id).expect(201);
    await linkTag(carol, redOnly.id, red.id).expect(201);

    const ids = async (query: string) => {
      const res = await service.http.get(`/tasks?sort=createdAt&${query}`).set('Authorization', carol.auth).expect(200);
      return TaskPageSchema.parse(res.body).items.map((t) => t.id);
    };
    expect(await ids(`tagId=${red.id}`)).toEqual([both.id, redOnly.id]);
    expect(await ids(`tagId=${red.id},${blue.id}`)).toEqual([both.id]);
    expect(await ids(`tagId=${blue.id}`)).toEqual([both.id]);
    await service.http.delete(`/tasks/${both.id}/tags/${blue.id}`).set('Authorization', carol.auth).expect(204);
    expect(await ids(`tagId=${red.id},${blue.id}`)).toEqual([]);
  });
});
