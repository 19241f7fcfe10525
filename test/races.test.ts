import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { AuthResultSchema } from '../contract/auth.js';
import { TagSchema, type Tag } from '../contract/tags.js';
import { TaskSchema } from '../contract/tasks.js';
import { tables } from '../server/db/query.js';
import { countAdmins, makeAdmin } from './support/rows.js';
import { UserSchema } from '../contract/users.js';
import { serviceForFile } from './support/app.js';
import { registerUser, type TestUser, uniqueEmail, userForFile } from './support/users.js';
import { createTask, getTask } from './support/tasks.js';
import { ofType, readAllChanges } from './support/events.js';

// Every test fires concurrent requests over HTTP and checks an invariant, round after round: on
// PostgreSQL the requests really interleave (on PGlite they run one at a time and prove little).
const ROUNDS = 15;

/** How often each status was answered. */
function tally(statuses: number[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const status of statuses) counts[status] = (counts[status] ?? 0) + 1;
  return counts;
}

/** Runs `round` ROUNDS times and collects what each round reports as wrong (empty: all held). */
async function everyRound(round: (index: number) => Promise<string[]>): Promise<string[]> {
  const failures: string[] = [];
  for (let i = 0; i < ROUNDS; i++) failures.push(...(await round(i)).map((failure) => `round ${i}: ${failure}`));
  return failures;
}

describe('concurrent writes', () => {
  const service = serviceForFile({ ATTACHMENTS_MAX_PER_TASK: '3' });
  const alice = userForFile(service);
  const bob = userForFile(service);

  const createTag = async (user: TestUser, name: string): Promise<Tag> =>
    TagSchema.parse((await service.http.post('/tags').set('Authorization', user.auth).send({ name }).expect(201)).body);

  it('tag PATCH: a rename and a recolour at once both stay', async () => {
    const failures = await everyRound(async (i) => {
      const tag = await createTag(alice, `tag-${i}`);
      const [renamed, recoloured] = await Promise.all([
        service.http
          .patch(`/tags/${tag.id}`)
          .set('Authorization', alice.auth)
          .send({ name: `renamed-${i}` }),
        service.http.patch(`/tags/${tag.id}`).set('Authorization', alice.auth).send({ color: '#123456' }),
      ]);
      const after = TagSchema.parse(
        (await service.http.get(`/tags/${tag.id}`).set('Authorization', alice.auth).expect(200)).body,
      );
      const wrong: string[] = [];
      if (renamed.status !== 200 || recoloured.status !== 200)
        wrong.push(`statuses ${renamed.status}/${recoloured.status}`);
      if (after.name !== `renamed-${i}` || after.color !== '#123456')
        wrong.push(`lost update: ${after.name} ${after.color}`);
      return wrong;
    });
    expect(failures).toEqual([]);
  });

  it('tag DELETE: of concurrent deletes one is 204, the others 404; a PATCH meanwhile is 200 or 404', async () => {
    const failures = await everyRound(async (i) => {
      const tag = await createTag(alice, `doomed-${i}`);
      const task = await createTask(service, alice, { tagIds: [tag.id] });
      const answers = await Promise.all([
        ...[1, 2, 3].map(() => service.http.delete(`/tags/${tag.id}`).set('Authorization', alice.auth)),
        service.http.patch(`/tags/${tag.id}`).set('Authorization', alice.auth).send({ color: '#654321' }),
      ]);
      const deletes = tally(answers.slice(0, 3).map((res) => res.status));
      const patch = answers[3]?.status ?? 0;
      const after = await getTask(service, alice, task.id);
      const wrong: string[] = [];
      if (deletes[204] !== 1 || deletes[404] !== 2) wrong.push(`deletes ${JSON.stringify(deletes)}`);
      if (patch !== 200 && patch !== 404) wrong.push(`patch ${patch}`);
      if (after.tags.length !== 0) wrong.push('the task still carries the deleted tag');
      return wrong;
    });
    expect(failures).toEqual([]);
  });

  it('task PATCH without If-Match: every one succeeds (no 412) and every field sent stays', async () => {
    const failures = await everyRound(async () => {
      const task = await createTask(service, alice);
      const changes = [
        { title: 'new title' },
        { description: 'new description' },
        { status: 'done' },
        { priority: 'urgent' },
        { dueAt: '2030-01-01T00:00:00.000Z' },
        { assigneeId: bob.user.id },
        { title: 'new title', priority: 'urgent' },
        { description: 'new description', status: 'done' },
      ];
      const answers = await Promise.all(
        changes.map((change) => service.http.patch(`/tasks/${task.id}`).set('Authorization', alice.auth).send(change)),
      );
      const after = await getTask(service, alice, task.id);
      const wrong: string[] = [];
      const statuses = tally(answers.map((res) => res.status));
      if (statuses[200] !== changes.length) wrong.push(`statuses ${JSON.stringify(statuses)}`);
      const kept =
        after.title === 'new title' &&
        after.description === 'new description' &&
        after.status === 'done' &&
        after.priority === 'urgent' &&
        after.dueAt === '2030-01-01T00:00:00.000Z' &&
        after.assigneeId === bob.user.id &&
        after.completedAt !== null;
      if (!kept) wrong.push(`lost update: ${JSON.stringify(after)}`);
      return wrong;
    });
    expect(failures).toEqual([]);
  });

  it('task PUT without If-Match and PATCH with If-Match: *: every one succeeds, each a new version', async () => {
    const failures = await everyRound(async () => {
      const task = await createTask(service, alice);
      const full = (title: string) => ({
        title,
        description: '',
        status: 'todo',
        priority: 'low',
        dueAt: null,
        assigneeId: null,
      });
      const answers = await Promise.all([
        ...[1, 2, 3, 4].map((n) =>
          service.http
            .put(`/tasks/${task.id}`)
            .set('Authorization', alice.auth)
            .send(full(`put ${n}`)),
        ),
        ...[1, 2, 3, 4].map((n) =>
          service.http
            .patch(`/tasks/${task.id}`)
            .set('Authorization', alice.auth)
            .set('If-Match', '*')
            .send({ description: `patch ${n}` }),
        ),
      ]);
      const after = await getTask(service, alice, task.id);
      const wrong: string[] = [];
      const statuses = tally(answers.map((res) => res.status));
      if (statuses[200] !== answers.length) wrong.push(`statuses ${JSON.stringify(statuses)}`);
      // Every write changed the task (distinct values), so each one made exactly one version.
      const versions = answers.filter((res) => res.status === 200).map((res) => TaskSchema.parse(res.body).version);
      if (new Set(versions).size !== versions.length) wrong.push(`versions answered twice: ${versions.join(',')}`);
      if (after.version !== 1 + versions.length) wrong.push(`version ${after.version} after ${versions.length} writes`);
      return wrong;
    });
    expect(failures).toEqual([]);
  });

  it('task PATCH with the same If-Match: exactly one wins, the others are 412', async () => {
    const failures = await everyRound(async () => {
      const task = await createTask(service, alice);
      const answers = await Promise.all(
        [1, 2, 3, 4, 5].map((n) =>
          service.http
            .patch(`/tasks/${task.id}`)
            .set('Authorization', alice.auth)
            .set('If-Match', '"1"')
            .send({ title: `t${n}` }),
        ),
      );
      const statuses = tally(answers.map((res) => res.status));
      const after = await getTask(service, alice, task.id);
      const wrong: string[] = [];
      if (statuses[200] !== 1 || statuses[412] !== 4) wrong.push(`statuses ${JSON.stringify(statuses)}`);
      if (after.version !== 2) wrong.push(`version ${after.version}`);
      return wrong;
    });
    expect(failures).toEqual([]);
  });

  it('task DELETE, with or without If-Match: one 204, the others 404 (never 412)', async () => {
    const failures = await everyRound(async (i) => {
      const task = await createTask(service, alice);
      const answers = await Promise.all(
        [1, 2, 3, 4].map((n) => {
          const req = service.http.delete(`/tasks/${task.id}`).set('Authorization', alice.auth);
          return (n + i) % 2 === 0 ? req.set('If-Match', '"1"') : req;
        }),
      );
      const statuses = tally(answers.map((res) => res.status));
      return statuses[204] === 1 && statuses[404] === 3 ? [] : [`statuses ${JSON.stringify(statuses)}`];
    });
    expect(failures).toEqual([]);
  });

  it('tag link and unlink: each change is one version, none lost, alongside task PATCHes', async () => {
    const tags = await Promise.all([1, 2, 3].map((n) => createTag(alice, `link-${n}`)));
    const [first, second, third] = tags;
    if (!first || !second || !third) throw new Error('tags missing');
    const failures = await everyRound(async () => {
      const task = await createTask(service, alice, { tagIds: [third.id] });
      const link = (tag: Tag) => service.http.post(`/tasks/${task.id}/tags/${tag.id}`).set('Authorization', alice.auth);
      const answers = await Promise.all([
        link(first),
        link(first),
        link(second),
        service.http.delete(`/tasks/${task.id}/tags/${third.id}`).set('Authorization', alice.auth),
        service.http.patch(`/tasks/${task.id}`).set('Authorization', alice.auth).send({ title: 'patched' }),
      ]);
      const statuses = answers.map((res) => res.status);
      const after = await getTask(service, alice, task.id);
      const wrong: string[] = [];
      const firstLinks = tally(statuses.slice(0, 2));
      if (firstLinks[201] !== 1 || firstLinks[200] !== 1) wrong.push(`same tag twice: ${JSON.stringify(firstLinks)}`);
      if (statuses[2] !== 201 || statuses[3] !== 204 || statuses[4] !== 200)
        wrong.push(`statuses ${statuses.join(',')}`);
      // Four changes: two links, one unlink, one PATCH.
      if (after.version !== 5) wrong.push(`version ${after.version}`);
      if (after.title !== 'patched') wrong.push('lost PATCH');
      if (
        after.tags
          .map((tag) => tag.id)
          .sort()
          .join() !== [first.id, second.id].sort().join()
      )
        wrong.push(`tags ${after.tags.map((t) => t.name).join(',')}`);
      return wrong;
    });
    expect(failures).toEqual([]);
  });

  it('attachments: concurrent uploads never pass the per-task limit', async () => {
    const failures = await everyRound(async () => {
      const task = await createTask(service, alice);
      const answers = await Promise.all(
        [1, 2, 3, 4, 5, 6].map((n) =>
          service.http
            .post(`/tasks/${task.id}/attachments`)
            .set('Authorization', alice.auth)
            .attach('file', Buffer.from(`file ${n}`), { filename: `f${n}.txt`, contentType: 'text/plain' }),
        ),
      );
      const statuses = tally(answers.map((res) => res.status));
      const after = await getTask(service, alice, task.id);
      const wrong: string[] = [];
      if (statuses[201] !== 3 || statuses[409] !== 3) wrong.push(`statuses ${JSON.stringify(statuses)}`);
      if (after.attachmentCount !== 3 || after.version !== 4)
        wrong.push(`count ${after.attachmentCount}, version ${after.version}`);
      return wrong;
    });
    expect(failures).toEqual([]);
  });

  it('tag link and unlink of one tag at once: one task.updated per committed change, versions in order, each with the tags after it', async () => {
    const carol = await registerUser(service);
    const failures = await everyRound(async (i) => {
      const tag = await createTag(carol, `toggled-${i}`);
      const task = await createTask(service, carol);
      const cursor = (await readAllChanges(service, carol)).cursor;
      const answers = await Promise.all(
        Array.from({ length: 8 }, (_, n) =>
          n % 2 === 0
            ? service.http.post(`/tasks/${task.id}/tags/${tag.id}`).set('Authorization', carol.auth)
            : service.http.delete(`/tasks/${task.id}/tags/${tag.id}`).set('Authorization', carol.auth),
        ),
      );
      const statuses = tally(answers.map((res) => res.status));
      const committed = (statuses[201] ?? 0) + (statuses[204] ?? 0);
      const updates = ofType((await readAllChanges(service, carol, cursor)).events, 'task.updated').filter(
        (event) => event.data.task.id === task.id,
      );
      const after = await getTask(service, carol, task.id);
      const wrong: string[] = [];
      if ((statuses[201] ?? 0) + (statuses[200] ?? 0) !== 4 || (statuses[204] ?? 0) + (statuses[404] ?? 0) !== 4)
        wrong.push(`statuses ${JSON.stringify(statuses)}`);
      if (updates.length !== committed) wrong.push(`${updates.length} events for ${committed} changes`);
      const versions = updates.map((event) => event.data.task.version);
      if (versions.join() !== Array.from({ length: committed }, (_, n) => task.version + 1 + n).join())
        wrong.push(`versions ${versions.join()}`);
      // A link is possible only while unlinked and an unlink only while linked: the changes alternate.
      const carried = updates.map((event) => event.data.task.tags.some((t) => t.id === tag.id));
      if (carried.some((has, n) => has !== (n % 2 === 0))) wrong.push(`tags in order of events: ${carried.join()}`);
      if (after.version !== task.version + committed) wrong.push(`version ${after.version} after ${committed} changes`);
      if (after.tags.some((t) => t.id === tag.id) !== (committed % 2 === 1))
        wrong.push('the task does not show the last change');
      return wrong;
    });
    expect(failures).toEqual([]);
  });

  it('tag rename alongside links of it: every task carrying it shows the new name, and its last event too', async () => {
    const dave = await registerUser(service);
    const failures = await everyRound(async (i) => {
      const tag = await createTag(dave, `before-${i}`);
      const carrier = await createTask(service, dave, { tagIds: [tag.id] });
      const others = await Promise.all([1, 2, 3].map(() => createTask(service, dave)));
      const cursor = (await readAllChanges(service, dave)).cursor;
      const answers = await Promise.all([
        service.http
          .patch(`/tags/${tag.id}`)
          .set('Authorization', dave.auth)
          .send({ name: `after-${i}` }),
        ...others.map((task) => service.http.post(`/tasks/${task.id}/tags/${tag.id}`).set('Authorization', dave.auth)),
      ]);
      const wrong: string[] = [];
      if (answers.map((res) => res.status).join() !== '200,201,201,201')
        wrong.push(`statuses ${answers.map((res) => res.status).join()}`);
      const updates = ofType((await readAllChanges(service, dave, cursor)).events, 'task.updated');
      for (const task of [carrier, ...others]) {
        const after = await getTask(service, dave, task.id);
        const last = updates.filter((event) => event.data.task.id === task.id).at(-1);
        if (after.tags.map((t) => t.name).join() !== `after-${i}`)
          wrong.push(`task ${task.id} shows ${after.tags.map((t) => t.name).join()}`);
        if (!last || JSON.stringify(last.data.task) !== JSON.stringify(after))
          wrong.push(`task ${task.id}: its last event is not its state`);
      }
      return wrong;
    });
    expect(failures).toEqual([]);
  });

  it('tag rename alongside creates of tasks with it: every new task shows the new name, and its last event too', async () => {
    const erin = await registerUser(service);
    const failures = await everyRound(async (i) => {
      const tag = await createTag(erin, `old-${i}`);
      const cursor = (await readAllChanges(service, erin)).cursor;
      const [renamed, ...created] = await Promise.all([
        service.http
          .patch(`/tags/${tag.id}`)
          .set('Authorization', erin.auth)
          .send({ name: `new-${i}` }),
        ...[1, 2, 3].map(() =>
          service.http
            .post('/tasks')
            .set('Authorization', erin.auth)
            .send({ title: `tagged ${i}`, tagIds: [tag.id] }),
        ),
      ]);
      const wrong: string[] = [];
      if ([renamed, ...created].map((res) => res.status).join() !== '200,201,201,201')
        wrong.push(`statuses ${[renamed, ...created].map((res) => res.status).join()}`);
      const events = (await readAllChanges(service, erin, cursor)).events.filter(
        (event) => event.type === 'task.created' || event.type === 'task.updated',
      );
      for (const res of created) {
        const id = TaskSchema.parse(res.body).id;
        const after = await getTask(service, erin, id);
        const last = events.filter((event) => 'task' in event.data && event.data.task.id === id).at(-1);
        if (after.tags.map((t) => t.name).join() !== `new-${i}`)
          wrong.push(`task ${id} shows ${after.tags.map((t) => t.name).join()}`);
        if (!last || !('task' in last.data) || JSON.stringify(last.data.task) !== JSON.stringify(after))
          wrong.push(`task ${id}: its last event is not its state`);
      }
      return wrong;
    });
    expect(failures).toEqual([]);
  });

  it('user PATCH: a new name and a new email at once both stay; concurrent DELETEs: one 204, the others 404', async () => {
    const failures = await everyRound(async (i) => {
      const user = await registerUser(service);
      const email = uniqueEmail(`patched-${i}`);
      const [named, emailed] = await Promise.all([
        service.http
          .patch(`/users/${user.user.id}`)
          .set('Authorization', user.auth)
          .send({ name: `Name ${i}` }),
        service.http.patch(`/users/${user.user.id}`).set('Authorization', user.auth).send({ email }),
      ]);
      const after = UserSchema.parse(
        (await service.http.get(`/users/${user.user.id}`).set('Authorization', user.auth).expect(200)).body,
      );
      const wrong: string[] = [];
      if (named.status !== 200 || emailed.status !== 200)
        wrong.push(`patch statuses ${named.status}/${emailed.status}`);
      if (after.name !== `Name ${i}` || after.email !== email) wrong.push(`lost update: ${after.name} ${after.email}`);
      const deletes = await Promise.all(
        [1, 2, 3].map(() => service.http.delete(`/users/${user.user.id}`).set('Authorization', user.auth)),
      );
      const statuses = tally(deletes.map((res) => res.status));
      // The first delete ends the caller's session: the others are 401 or 404, never a 5xx.
      if (statuses[204] !== 1 || (statuses[404] ?? 0) + (statuses[401] ?? 0) !== 2)
        wrong.push(`delete statuses ${JSON.stringify(statuses)}`);
      return wrong;
    });
    expect(failures).toEqual([]);
  });
});

describe('the last admin under concurrent promotions, demotions and deletions', () => {
  const service = serviceForFile();

  const admins = () => countAdmins(service.ctx.db.sql);

  it('always keeps at least one admin', async () => {
    const failures = await everyRound(async () => {
      // One admin, one user; at once: the user is promoted, the user is deleted, the admin steps down.
      const [admin, user] = await Promise.all([registerUser(service), registerUser(service)]);
      await service.ctx.db.sql.write(tables.updateTable('users').set({ role: 'user' }).where('role', '=', 'admin'));
      await makeAdmin(service.ctx.db.sql, admin.user.id);
      await Promise.all([
        service.http.patch(`/users/${user.user.id}`).set('Authorization', admin.auth).send({ role: 'admin' }),
        service.http.delete(`/users/${user.user.id}`).set('Authorization', admin.auth),
        service.http.patch(`/users/${admin.user.id}`).set('Authorization', admin.auth).send({ role: 'user' }),
      ]);
      const count = await admins();
      return count >= 1 ? [] : [`${count} admins`];
    });
    expect(failures).toEqual([]);
  });
});

describe('deleting an ordinary user', () => {
  const service = serviceForFile();

  it('does not wait for the admins: it completes while another transaction holds an admin row', async () => {
    const [admin, user] = await Promise.all([registerUser(service), registerUser(service)]);
    await makeAdmin(service.ctx.db.sql, admin.user.id);
    const other = new pg.Client({ connectionString: service.databaseUrl });
    await other.connect();
    try {
      await other.query('BEGIN');
      await other.query('SELECT id FROM users WHERE id = $1 FOR UPDATE', [admin.user.id]);
      const res = await service.http.delete(`/users/${user.user.id}`).set('Authorization', admin.auth).timeout(3000);
      expect(res.status).toBe(204);
    } finally {
      await other.query('ROLLBACK');
      await other.end();
    }
  });
});

describe('refresh from two tabs at once', () => {
  const service = serviceForFile();

  it('answers every concurrent refresh of one token with a pair for the same, still open session', async () => {
    const failures = await everyRound(async () => {
      const user = await registerUser(service);
      const answers = await Promise.all(
        [1, 2, 3].map(() => service.http.post('/auth/refresh').send({ refreshToken: user.refreshToken })),
      );
      const statuses = answers.map((res) => res.status);
      if (statuses.some((status) => status !== 200)) return [`statuses ${statuses.join(',')}`];
      const wrong: string[] = [];
      for (const res of answers) {
        const pair = AuthResultSchema.parse(res.body);
        const me = await service.http.get('/auth/me').set('Authorization', `Bearer ${pair.accessToken}`);
        if (me.status !== 200) wrong.push(`the session was revoked (${me.status})`);
      }
      return wrong;
    });
    expect(failures).toEqual([]);
  });
});

describe('throttles under concurrent attempts', () => {
  const service = serviceForFile({ TRUST_PROXY: 'true', REGISTRATIONS_PER_ADDRESS_PER_HOUR: '5' });

  it('simultaneous wrong logins from one address get at most the pair limit of password checks', async () => {
    const user = await registerUser(service);
    const answers = await Promise.all(
      Array.from({ length: 12 }, () =>
        service.http
          .post('/auth/login')
          .set('X-Forwarded-For', '203.0.113.7')
          .send({ email: user.email, password: 'wrong password' }),
      ),
    );
    const statuses = tally(answers.map((res) => res.status));
    expect(statuses).toEqual({ 401: 5, 429: 7 });
  });

  it('simultaneous registrations from one address: exactly the hourly limit succeed', async () => {
    const answers = await Promise.all(
      Array.from({ length: 9 }, () =>
        service.http
          .post('/auth/register')
          .set('X-Forwarded-For', '203.0.113.9')
          .send({ email: uniqueEmail('burst'), password: 'correct horse battery', name: 'Burst' }),
      ),
    );
    expect(tally(answers.map((res) => res.status))).toEqual({ 201: 5, 429: 4 });
  });
});
