import { randomUUID } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';
import { beforeAll, describe, expect, it } from 'vitest';
import { AttachmentSchema, type Attachment } from '../contract/attachments.js';
import { listOf, pageOf } from '../contract/common.js';
import { TagSchema } from '../contract/tags.js';
import { TaskSchema, type Task } from '../contract/tasks.js';
import { tables } from '../server/db/query.js';
import { UserSchema, type User } from '../contract/users.js';
import { serviceForFile, type TestService } from './support/app.js';
import {
  login,
  loginRequest,
  registerAdmin,
  registerUser,
  type TestUser,
  uniqueEmail,
  userForFile,
} from './support/users.js';
import { errorPaths, expectProblem } from './support/problems.js';
import { nextLink, walkPages } from './support/pages.js';
import { countAdmins, countOf, countOwned, countUsersWithEmail, storageKeyOf } from './support/rows.js';
import { createTask } from './support/tasks.js';

const UserPageSchema = pageOf(UserSchema);
const TaskPageSchema = pageOf(TaskSchema);

async function upload(service: TestService, uploader: TestUser, taskId: string, filename: string): Promise<Attachment> {
  const res = await service.http
    .post(`/tasks/${taskId}/attachments`)
    .set('Authorization', uploader.auth)
    .attach('file', Buffer.from(`bytes of ${filename}`), { filename, contentType: 'text/plain' })
    .expect(201);
  return AttachmentSchema.parse(res.body);
}

async function adminCount(service: TestService): Promise<number> {
  return countAdmins(service.ctx.db.sql);
}

const ids = (items: { id: string }[]) => items.map((item) => item.id);

describe('users', () => {
  const service = serviceForFile();
  const admin = userForFile(service, { admin: true });

  describe('GET /users', () => {
    it('is for admins only', async () => {
      const user = await registerUser(service);
      expectProblem(await service.http.get('/users').set('Authorization', user.auth), 403, 'forbidden');
      const anonymous = await service.http.get('/users');
      expectProblem(anonymous, 401, 'unauthenticated');
      expect(anonymous.get('WWW-Authenticate')).toMatch(/^Bearer/);
      const res = await service.http.get('/users').set('Authorization', admin.auth).expect(200);
      expect(ids(UserPageSchema.parse(res.body).items)).toContain(user.user.id);
    });

    it('pages through every user oldest first, with no duplicates or gaps', async () => {
      for (let i = 0; i < 5; i++) await registerUser(service);
      const all = await service.ctx.db.sql.all(tables.selectFrom('users').select('id').orderBy('id', 'asc'));
      const pages = await walkPages(service, admin.auth, '/users?limit=2', UserPageSchema);
      expect(pages.length).toBe(Math.ceil(all.length / 2));
      for (const page of pages.slice(0, -1)) expect(page.length).toBe(2);
      expect(ids(pages.flat())).toEqual(all.map((u) => u.id));
    });

    it('keeps pages stable while users are added', async () => {
      const marker = `stable${randomUUID().slice(0, 6)}`;
      const created: string[] = [];
      for (let i = 0; i < 4; i++) created.push((await registerUser(service, { name: `${marker} ${i}` })).user.id);
      const first = await service.http.get(`/users?limit=3&q=${marker}`).set('Authorization', admin.auth).expect(200);
      const firstPage = UserPageSchema.parse(first.body);
      expect(ids(firstPage.items)).toEqual(created.slice(0, 3));
      created.push((await registerUser(service, { name: `${marker} late` })).user.id);
      const rest = await walkPages(service, admin.auth, nextLink(first) ?? 'missing', UserPageSchema);
      expect([...ids(firstPage.items), ...ids(rest.flat())]).toEqual(created);
    });

    it('filters by q, a case-insensitive substring of email or name', async () => {
      const marker = randomUUID().slice(0, 8);
      const byEmail = await registerUser(service, { email: `Quokka.${marker}@Example.TEST`, name: 'Plain Name' });
      const byName = await registerUser(service, { name: `Keeper of Quokkas ${marker}` });
      await registerUser(service, { name: 'Someone Else' });
      const list = async (q: string) =>
        ids(
          UserPageSchema.parse(
            (await service.http.get('/users').query({ q }).set('Authorization', admin.auth).expect(200)).body,
          ).items,
        );
      expect(await list(`QUOKKA.${marker.toUpperCase()}`)).toEqual([byEmail.user.id]);
      expect(await list(`qUOKKAS ${marker}`)).toEqual([byName.user.id]);
      expect(await list(marker.toUpperCase())).toEqual([byEmail.user.id, byName.user.id]);
      expect(await list(`nobody-${marker}`)).toEqual([]);
      // LIKE wildcards are plain characters: nobody's email or name contains these.
      expect(await list('%')).toEqual([]);
      expect(await list('_')).toEqual([]);
    });

    it('filters by role, alone and with q', async () => {
      const user = await registerUser(service);
      const admins = UserPageSchema.parse(
        (await service.http.get('/users?role=admin&limit=100').set('Authorization', admin.auth).expect(200)).body,
      );
      expect(admins.items.length).toBeGreaterThan(0);
      expect(admins.items.every((u) => u.role === 'admin')).toBe(true);
      expect(ids(admins.items)).toContain(admin.user.id);
      const users = UserPageSchema.parse(
        (await service.http.get('/users?role=user&limit=100').set('Authorization', admin.auth).expect(200)).body,
      );
      expect(users.items.every((u) => u.role === 'user')).toBe(true);
      expect(ids(users.items)).toContain(user.user.id);
      const none = await service.http
        .get('/users')
        .query({ role: 'admin', q: user.email })
        .set('Authorization', admin.auth)
        .expect(200);
      expect(UserPageSchema.parse(none.body).items).toEqual([]);
      expectProblem(
        await service.http.get('/users?role=root').set('Authorization', admin.auth),
        400,
        'validation_failed',
      );
    });

    it.each(['0', '101', 'abc', '2.5', ''])('rejects limit=%j', async (limit) => {
      const problem = expectProblem(
        await service.http.get(`/users?limit=${limit}`).set('Authorization', admin.auth),
        400,
        'validation_failed',
      );
      expect(problem.errors?.map((e) => e.path)).toContain('query.limit');
    });

    it('rejects unknown query parameters', async () => {
      expectProblem(
        await service.http.get('/users?sort=email').set('Authorization', admin.auth),
        400,
        'validation_failed',
      );
    });

    it('rejects forged cursors', async () => {
      const forged = [
        'not-a-cursor',
        Buffer.from('{"s":"id","v":null,"id":"nope"}').toString('base64url'),
        Buffer.from(JSON.stringify({ s: '-createdAt', v: new Date().toISOString(), id: uuidv7() })).toString(
          'base64url',
        ),
        Buffer.from('[]').toString('base64url'),
      ];
      for (const cursor of forged) {
        const res = await service.http.get('/users').query({ cursor }).set('Authorization', admin.auth);
        expect(expectProblem(res, 400, 'validation_failed').errors?.map((e) => e.path)).toEqual(['query.cursor']);
      }
    });
  });

  describe('GET /users/{id}', () => {
    it('answers the user to themself and to an admin, without secrets', async () => {
      const alice = await registerUser(service, { name: 'Alice' });
      const self = await service.http.get(`/users/${alice.user.id}`).set('Authorization', alice.auth).expect(200);
      expect(Object.keys(self.body).sort()).toEqual(['createdAt', 'email', 'id', 'name', 'role', 'updatedAt']);
      expect(UserSchema.parse(self.body)).toEqual(alice.user);
      const byAdmin = await service.http.get(`/users/${alice.user.id}`).set('Authorization', admin.auth).expect(200);
      expect(UserSchema.parse(byAdmin.body)).toEqual(alice.user);
    });

    it('hides other users (404), and tells malformed ids (400) from unknown ones (404)', async () => {
      const alice = await registerUser(service);
      const bob = await registerUser(service);
      expectProblem(await service.http.get(`/users/${bob.user.id}`).set('Authorization', alice.auth), 404, 'not_found');
      expectProblem(
        await service.http.get(`/users/${admin.user.id}`).set('Authorization', alice.auth),
        404,
        'not_found',
      );
      expectProblem(await service.http.get(`/users/${uuidv7()}`).set('Authorization', admin.auth), 404, 'not_found');
      expectProblem(await service.http.get(`/users/${uuidv7()}`).set('Authorization', alice.auth), 404, 'not_found');
      const malformed = expectProblem(
        await service.http.get('/users/not-a-uuid').set('Authorization', admin.auth),
        400,
        'validation_failed',
      );
      expect(malformed.errors?.map((e) => e.path)).toEqual(['path.user_id']);
      expectProblem(await service.http.get(`/users/${bob.user.id}`), 401, 'unauthenticated');
    });
  });

  describe('GET /users/{id}/tasks', () => {
    let alice: TestUser;
    let bob: TestUser;
    let a1: Task, a2: Task, b1: Task, a3: Task;

    beforeAll(async () => {
      alice = await registerUser(service);
      bob = await registerUser(service);
      const carol = await registerUser(service);
      a1 = await createTask(service, alice, { title: 'a1 owned' });
      a2 = await createTask(service, alice, {
        title: 'a2 owned, given to bob',
        status: 'done',
        assigneeId: bob.user.id,
      });
      b1 = await createTask(service, bob, {
        title: 'b1 bob gives to alice',
        status: 'in_progress',
        assigneeId: alice.user.id,
      });
      await createTask(service, bob, { title: 'b2 bob keeps' });
      await createTask(service, carol, { title: 'c1 carol keeps', assigneeId: carol.user.id });
      a3 = await createTask(service, alice, { title: 'a3 owned and self-assigned', assigneeId: alice.user.id });
    });

    const listIds = async (caller: TestUser, userId: string, query = '') => {
      const res = await service.http
        .get(`/users/${userId}/tasks${query}`)
        .set('Authorization', caller.auth)
        .expect(200);
      return ids(TaskPageSchema.parse(res.body).items);
    };

    it('lists owned and assigned tasks once each, newest first, for relation=any (the default)', async () => {
      expect(await listIds(alice, alice.user.id)).toEqual(ids([a3, b1, a2, a1]));
      expect(await listIds(alice, alice.user.id, '?relation=any')).toEqual(ids([a3, b1, a2, a1]));
    });

    it('narrows to relation=owner and relation=assignee', async () => {
      expect(await listIds(alice, alice.user.id, '?relation=owner')).toEqual(ids([a3, a2, a1]));
      expect(await listIds(alice, alice.user.id, '?relation=assignee')).toEqual(ids([a3, b1]));
      expect(await listIds(bob, bob.user.id, '?relation=assignee')).toEqual(ids([a2]));
      expectProblem(
        await service.http.get(`/users/${alice.user.id}/tasks?relation=watcher`).set('Authorization', alice.auth),
        400,
        'validation_failed',
      );
    });

    it('applies the filters and sort of GET /tasks', async () => {
      expect(await listIds(alice, alice.user.id, '?status=todo')).toEqual(ids([a3, a1]));
      expect(await listIds(alice, alice.user.id, '?status=todo,in_progress')).toEqual(ids([a3, b1, a1]));
      expect(await listIds(alice, alice.user.id, '?relation=owner&status=done')).toEqual(ids([a2]));
      expect(await listIds(alice, alice.user.id, '?relation=assignee&status=done')).toEqual([]);
      expect(await listIds(alice, alice.user.id, '?q=GIVES')).toEqual(ids([b1]));
      expect(await listIds(alice, alice.user.id, '?sort=title')).toEqual(ids([a1, a2, a3, b1]));
      expectProblem(
        await service.http.get(`/users/${alice.user.id}/tasks?status=finished`).set('Authorization', alice.auth),
        400,
        'validation_failed',
      );
    });

    it('paginates with nextCursor and Link, keeping the query', async () => {
      const pages = await walkPages(
        service,
        alice.auth,
        `/users/${alice.user.id}/tasks?limit=2&relation=any`,
        TaskPageSchema,
      );
      expect(pages.map((page) => ids(page))).toEqual([ids([a3, b1]), ids([a2, a1])]);
      const owned = await walkPages(
        service,
        alice.auth,
        `/users/${alice.user.id}/tasks?limit=1&relation=owner&sort=title`,
        TaskPageSchema,
      );
      expect(owned.map((page) => ids(page))).toEqual([[a1.id], [a2.id], [a3.id]]);
      expectProblem(
        await service.http.get(`/users/${alice.user.id}/tasks?limit=0`).set('Authorization', alice.auth),
        400,
        'validation_failed',
      );
      expectProblem(
        await service.http.get(`/users/${alice.user.id}/tasks?cursor=forged`).set('Authorization', alice.auth),
        400,
        'validation_failed',
      );
    });

    it('lets an admin list any user’s tasks, with the same scope', async () => {
      expect(await listIds(admin, alice.user.id)).toEqual(ids([a3, b1, a2, a1]));
      expect(await listIds(admin, bob.user.id, '?relation=owner&status=done')).toEqual([]);
      expectProblem(
        await service.http.get(`/users/${uuidv7()}/tasks`).set('Authorization', admin.auth),
        404,
        'not_found',
      );
    });

    it('hides another user’s tasks (404)', async () => {
      expectProblem(
        await service.http.get(`/users/${alice.user.id}/tasks`).set('Authorization', bob.auth),
        404,
        'not_found',
      );
      expectProblem(
        await service.http.get('/users/nope/tasks').set('Authorization', bob.auth),
        400,
        'validation_failed',
      );
    });
  });

  describe('POST /users', () => {
    it('lets an admin create a user, honouring role', async () => {
      const email = uniqueEmail('created');
      const res = await service.http
        .post('/users')
        .set('Authorization', admin.auth)
        .send({
          email: `  ${email.toUpperCase()} `,
          password: 'a fine password',
          name: ' Created Admin ',
          role: 'admin',
        })
        .expect(201);
      const created = UserSchema.parse(res.body);
      expect(res.get('Location')).toBe(`/users/${created.id}`);
      expect(created).toMatchObject({ email, name: 'Created Admin', role: 'admin' });
      const fetched = await service.http.get(`/users/${created.id}`).set('Authorization', admin.auth).expect(200);
      expect(UserSchema.parse(fetched.body)).toEqual(created);
      const session = await login(service, email, 'a fine password');
      expect(session.user.role).toBe('admin');
      await service.http.get('/users').set('Authorization', session.auth).expect(200);
    });

    it('creates plain users by default', async () => {
      const res = await service.http
        .post('/users')
        .set('Authorization', admin.auth)
        .send({ email: uniqueEmail(), password: 'a fine password', name: 'Plain' })
        .expect(201);
      expect(UserSchema.parse(res.body).role).toBe('user');
    });

    it('is for admins only', async () => {
      const user = await registerUser(service);
      const body = { email: uniqueEmail(), password: 'a fine password', name: 'Nope' };
      expectProblem(await service.http.post('/users').set('Authorization', user.auth).send(body), 403, 'forbidden');
      expectProblem(await service.http.post('/users').send(body), 401, 'unauthenticated');
      expect(await countUsersWithEmail(service.ctx.db.sql, body.email)).toBe(0);
    });

    it('answers 409 email_taken for an email in use, whatever its case', async () => {
      const existing = await registerUser(service);
      const res = await service.http
        .post('/users')
        .set('Authorization', admin.auth)
        .send({ email: existing.email.toUpperCase(), password: 'a fine password', name: 'Twin' });
      expectProblem(res, 409, 'email_taken');
    });

    it('rejects server-owned fields and invalid input', async () => {
      const valid = { email: uniqueEmail(), password: 'a fine password', name: 'Valid' };
      const cases: [Record<string, unknown>, string][] = [
        [{ ...valid, id: uuidv7() }, 'body'],
        [{ ...valid, createdAt: new Date().toISOString() }, 'body'],
        [{ ...valid, passwordHash: 'x' }, 'body'],
        [{ ...valid, role: 'root' }, 'body.role'],
        [{ ...valid, password: 'short' }, 'body.password'],
        [{ ...valid, email: 'not an email' }, 'body.email'],
        [{ ...valid, name: '   ' }, 'body.name'],
      ];
      for (const [body, path] of cases) {
        const problem = expectProblem(
          await service.http.post('/users').set('Authorization', admin.auth).send(body),
          400,
          'validation_failed',
        );
        expect(problem.errors?.map((e) => e.path)).toContain(path);
      }
      expect(await countUsersWithEmail(service.ctx.db.sql, valid.email)).toBe(0);
    });
  });

  describe('PUT /users/{id}', () => {
    it('replaces email and name, normalising the email', async () => {
      const alice = await registerUser(service);
      const email = uniqueEmail('renamed');
      const res = await service.http
        .put(`/users/${alice.user.id}`)
        .set('Authorization', alice.auth)
        .send({ email: email.toUpperCase(), name: 'Alice Renamed' })
        .expect(200);
      const updated = UserSchema.parse(res.body);
      expect(updated).toMatchObject({
        id: alice.user.id,
        email,
        name: 'Alice Renamed',
        role: 'user',
        createdAt: alice.user.createdAt,
      });
      expect(Date.parse(updated.updatedAt)).toBeGreaterThanOrEqual(Date.parse(alice.user.updatedAt));
      await login(service, email, alice.password);
    });

    it('requires both email and name', async () => {
      const alice = await registerUser(service);
      const missingName = await service.http
        .put(`/users/${alice.user.id}`)
        .set('Authorization', alice.auth)
        .send({ email: uniqueEmail() });
      expect(expectProblem(missingName, 400, 'validation_failed').errors?.map((e) => e.path)).toEqual(['body.name']);
      const missingEmail = await service.http
        .put(`/users/${alice.user.id}`)
        .set('Authorization', alice.auth)
        .send({ name: 'Only Name' });
      expect(expectProblem(missingEmail, 400, 'validation_failed').errors?.map((e) => e.path)).toEqual(['body.email']);
      const withId = await service.http
        .put(`/users/${alice.user.id}`)
        .set('Authorization', alice.auth)
        .send({ email: alice.email, name: 'X', id: uuidv7() });
      expectProblem(withId, 400, 'validation_failed');
      const unchanged = await service.http.get(`/users/${alice.user.id}`).set('Authorization', alice.auth).expect(200);
      expect(UserSchema.parse(unchanged.body)).toEqual(alice.user);
    });

    it('lets an admin set the role, and forbids a user to change their own', async () => {
      const alice = await registerUser(service);
      const promote = await service.http
        .put(`/users/${alice.user.id}`)
        .set('Authorization', admin.auth)
        .send({ email: alice.email, name: 'Promoted', role: 'admin' })
        .expect(200);
      expect(UserSchema.parse(promote.body).role).toBe('admin');
      const demote = await service.http
        .put(`/users/${alice.user.id}`)
        .set('Authorization', admin.auth)
        .send({ email: alice.email, name: 'Demoted', role: 'user' })
        .expect(200);
      expect(UserSchema.parse(demote.body).role).toBe('user');

      const selfPromote = await service.http
        .put(`/users/${alice.user.id}`)
        .set('Authorization', alice.auth)
        .send({ email: alice.email, name: 'Wannabe', role: 'admin' });
      expectProblem(selfPromote, 400, 'validation_failed');
      expect(errorPaths(selfPromote.body)).toEqual(['body.role']);
      // role is server-owned for non-admins: refused even when it restates the current one.
      const same = await service.http
        .put(`/users/${alice.user.id}`)
        .set('Authorization', alice.auth)
        .send({ email: alice.email, name: 'Same Role', role: 'user' });
      expectProblem(same, 400, 'validation_failed');
      expect(
        (await service.http.get(`/users/${alice.user.id}`).set('Authorization', alice.auth).expect(200)).body.name,
      ).not.toBe('Same Role');
      // An admin's PUT without role leaves it alone.
      const kept = await service.http
        .put(`/users/${alice.user.id}`)
        .set('Authorization', admin.auth)
        .send({ email: alice.email, name: 'Kept' })
        .expect(200);
      expect(UserSchema.parse(kept.body).role).toBe('user');
    });

    it('answers 409 email_taken for another account’s email', async () => {
      const alice = await registerUser(service);
      const bob = await registerUser(service);
      const res = await service.http
        .put(`/users/${alice.user.id}`)
        .set('Authorization', alice.auth)
        .send({ email: bob.email.toUpperCase(), name: 'Copycat' });
      expectProblem(res, 409, 'email_taken');
      const unchanged = await service.http.get(`/users/${alice.user.id}`).set('Authorization', alice.auth).expect(200);
      expect(UserSchema.parse(unchanged.body).email).toBe(alice.email);
    });

    it('hides other users (404)', async () => {
      const alice = await registerUser(service);
      const bob = await registerUser(service);
      expectProblem(
        await service.http
          .put(`/users/${bob.user.id}`)
          .set('Authorization', alice.auth)
          .send({ email: uniqueEmail(), name: 'Hijack' }),
        404,
        'not_found',
      );
      expectProblem(
        await service.http
          .put(`/users/${uuidv7()}`)
          .set('Authorization', admin.auth)
          .send({ email: uniqueEmail(), name: 'Ghost' }),
        404,
        'not_found',
      );
      const stillBob = await service.http.get(`/users/${bob.user.id}`).set('Authorization', bob.auth).expect(200);
      expect(UserSchema.parse(stillBob.body)).toEqual(bob.user);
    });
  });

  describe('PATCH /users/{id}', () => {
    it('changes only the fields sent', async () => {
      const alice = await registerUser(service, { name: 'Alice' });
      const renamed = UserSchema.parse(
        (
          await service.http
            .patch(`/users/${alice.user.id}`)
            .set('Authorization', alice.auth)
            .send({ name: 'Alice Two' })
            .expect(200)
        ).body,
      );
      expect(renamed).toMatchObject({ email: alice.email, name: 'Alice Two', role: 'user' });
      const email = uniqueEmail('patched');
      const moved = UserSchema.parse(
        (
          await service.http
            .patch(`/users/${alice.user.id}`)
            .set('Authorization', alice.auth)
            .send({ email: ` ${email.toUpperCase()}` })
            .expect(200)
        ).body,
      );
      expect(moved).toMatchObject({ email, name: 'Alice Two' });
      const merged = await service.http
        .patch(`/users/${alice.user.id}`)
        .set('Content-Type', 'application/merge-patch+json')
        .set('Authorization', alice.auth)
        .send({ name: 'Alice Three' })
        .expect(200);
      expect(UserSchema.parse(merged.body)).toMatchObject({ email, name: 'Alice Three' });
      await login(service, email, alice.password);
    });

    it('keeps updatedAt when nothing changes', async () => {
      const alice = await registerUser(service, { name: 'Same' });
      for (const body of [{}, { name: 'Same' }, { email: alice.email }]) {
        const res = await service.http
          .patch(`/users/${alice.user.id}`)
          .set('Authorization', alice.auth)
          .send(body)
          .expect(200);
        expect(UserSchema.parse(res.body).updatedAt).toBe(alice.user.updatedAt);
      }
    });

    it('rejects invalid fields and conflicting emails', async () => {
      const alice = await registerUser(service);
      const bob = await registerUser(service);
      expectProblem(
        await service.http
          .patch(`/users/${alice.user.id}`)
          .set('Authorization', alice.auth)
          .send({ email: bob.email.toUpperCase() }),
        409,
        'email_taken',
      );
      for (const body of [
        { id: uuidv7() },
        { updatedAt: new Date().toISOString() },
        { name: '' },
        { email: 'nope' },
        { password: 'short', currentPassword: alice.password },
      ]) {
        expectProblem(
          await service.http.patch(`/users/${alice.user.id}`).set('Authorization', alice.auth).send(body),
          400,
          'validation_failed',
        );
      }
      const unchanged = await service.http.get(`/users/${alice.user.id}`).set('Authorization', alice.auth).expect(200);
      expect(UserSchema.parse(unchanged.body)).toEqual(alice.user);
    });

    it('makes a user prove their current password, then revokes their other sessions only', async () => {
      const grace = await registerUser(service);
      const other = await login(service, grace.email, grace.password);
      const path = `/users/${grace.user.id}`;
      const newPassword = 'a brand new password';

      const missing = await service.http.patch(path).set('Authorization', grace.auth).send({ password: newPassword });
      expect(expectProblem(missing, 400, 'validation_failed').errors?.map((e) => e.path)).toEqual([
        'body.currentPassword',
      ]);
      const wrong = await service.http
        .patch(path)
        .set('Authorization', grace.auth)
        .send({ password: newPassword, currentPassword: 'not the password' });
      expect(expectProblem(wrong, 400, 'validation_failed').errors?.map((e) => e.path)).toEqual([
        'body.currentPassword',
      ]);
      // The failed attempts changed nothing.
      await login(service, grace.email, grace.password);
      await service.http.get('/auth/me').set('Authorization', other.auth).expect(200);

      const changed = await service.http
        .patch(path)
        .set('Authorization', grace.auth)
        .send({ password: newPassword, currentPassword: grace.password })
        .expect(200);
      expect(Object.keys(changed.body)).not.toContain('passwordHash');
      expect(UserSchema.parse(changed.body).id).toBe(grace.user.id);

      await service.http.get('/auth/me').set('Authorization', grace.auth).expect(200);
      expectProblem(await service.http.get('/auth/me').set('Authorization', other.auth), 401, 'unauthenticated');
      expectProblem(
        await service.http.post('/auth/refresh').send({ refreshToken: other.refreshToken }),
        401,
        'unauthenticated',
      );
      await service.http.post('/auth/refresh').send({ refreshToken: grace.refreshToken }).expect(200);
      expectProblem(await loginRequest(service, grace.email, grace.password), 401, 'invalid_credentials');
      await login(service, grace.email, newPassword);
    });

    it('throttles guesses of the current password like failed logins', async () => {
      const mallory = await registerUser(service);
      const path = `/users/${mallory.user.id}`;
      const { maxFailuresPerAccountAddress } = service.ctx.config.loginThrottle;
      for (let i = 0; i < maxFailuresPerAccountAddress; i++) {
        const guess = await service.http
          .patch(path)
          .set('Authorization', mallory.auth)
          .send({ password: 'taken over!', currentPassword: `guess ${i}` });
        expectProblem(guess, 400, 'validation_failed');
      }
      const blocked = await service.http
        .patch(path)
        .set('Authorization', mallory.auth)
        .send({ password: 'taken over!', currentPassword: mallory.password });
      expectProblem(blocked, 429, 'rate_limited');
      expect(Number(blocked.get('Retry-After'))).toBeGreaterThan(0);
      expectProblem(await loginRequest(service, mallory.email, mallory.password), 429, 'rate_limited');
      // Other changes still go through.
      await service.http.patch(path).set('Authorization', mallory.auth).send({ name: 'Still Here' }).expect(200);
    });

    it('lets an admin reset another user’s password without theirs, revoking all that user’s sessions', async () => {
      const heidi = await registerUser(service);
      const second = await login(service, heidi.email, heidi.password);
      const res = await service.http
        .patch(`/users/${heidi.user.id}`)
        .set('Authorization', admin.auth)
        .send({ password: 'reset by the admin' })
        .expect(200);
      expect(UserSchema.parse(res.body).id).toBe(heidi.user.id);
      for (const session of [heidi, second]) {
        expectProblem(await service.http.get('/auth/me').set('Authorization', session.auth), 401, 'unauthenticated');
      }
      await service.http.get('/auth/me').set('Authorization', admin.auth).expect(200);
      expectProblem(await loginRequest(service, heidi.email, heidi.password), 401, 'invalid_credentials');
      await login(service, heidi.email, 'reset by the admin');
    });

    it('lets only an admin change a role', async () => {
      const ivan = await registerUser(service);
      const path = `/users/${ivan.user.id}`;
      for (const role of ['admin', 'user']) {
        const res = await service.http.patch(path).set('Authorization', ivan.auth).send({ role });
        expectProblem(res, 400, 'validation_failed');
        expect(errorPaths(res.body)).toEqual(['body.role']);
      }
      expectProblem(await service.http.get('/users').set('Authorization', ivan.auth), 403, 'forbidden');

      const promoted = await service.http
        .patch(path)
        .set('Authorization', admin.auth)
        .send({ role: 'admin' })
        .expect(200);
      expect(UserSchema.parse(promoted.body).role).toBe('admin');
      // The role is read per request: the existing token now carries admin rights.
      await service.http.get('/users').set('Authorization', ivan.auth).expect(200);
      const demoted = await service.http
        .patch(path)
        .set('Authorization', admin.auth)
        .send({ role: 'user' })
        .expect(200);
      expect(UserSchema.parse(demoted.body).role).toBe('user');
      expectProblem(await service.http.get('/users').set('Authorization', ivan.auth), 403, 'forbidden');
    });

    it('hides other users (404)', async () => {
      const alice = await registerUser(service);
      const bob = await registerUser(service);
      expectProblem(
        await service.http.patch(`/users/${bob.user.id}`).set('Authorization', alice.auth).send({ name: 'Hijack' }),
        404,
        'not_found',
      );
      expectProblem(
        await service.http
          .patch(`/users/${bob.user.id}`)
          .set('Authorization', alice.auth)
          .send({ password: 'takeover pass' }),
        404,
        'not_found',
      );
      expectProblem(
        await service.http.patch(`/users/${admin.user.id}`).set('Authorization', alice.auth).send({ role: 'user' }),
        404,
        'not_found',
      );
      await login(service, bob.email, bob.password);
    });
  });

  describe('DELETE /users/{id}', () => {
    it('removes the user with their tasks, tags, attachments and sessions, and unassigns them elsewhere', async () => {
      const dave = await registerUser(service);
      const erin = await registerUser(service);
      const second = await login(service, dave.email, dave.password);
      const tag = TagSchema.parse(
        (await service.http.post('/tags').set('Authorization', dave.auth).send({ name: 'Home' }).expect(201)).body,
      );
      const tagged = await createTask(service, dave, { tagIds: [tag.id] });
      const plain = await createTask(service, dave, { assigneeId: erin.user.id });
      const erinsTask = await createTask(service, erin, { assigneeId: dave.user.id });
      const onOwnTask = await upload(service, dave, tagged.id, 'own.txt');
      const onErinsTask = await upload(service, dave, erinsTask.id, 'as-assignee.txt');
      const erinsOwn = await upload(service, erin, erinsTask.id, 'erins.txt');
      const keyOf = (id: string) => storageKeyOf(service.ctx.db.sql, id);
      const goneKeys = [await keyOf(onOwnTask.id), await keyOf(onErinsTask.id)];
      const keptKey = await keyOf(erinsOwn.id);

      const res = await service.http.delete(`/users/${dave.user.id}`).set('Authorization', admin.auth).expect(204);
      expect(res.text).toBe('');

      for (const session of [dave, second]) {
        expectProblem(await service.http.get('/auth/me').set('Authorization', session.auth), 401, 'unauthenticated');
        expectProblem(
          await service.http.post('/auth/refresh').send({ refreshToken: session.refreshToken }),
          401,
          'unauthenticated',
        );
      }
      expectProblem(await loginRequest(service, dave.email, dave.password), 401, 'invalid_credentials');
      expectProblem(
        await service.http.get(`/users/${dave.user.id}`).set('Authorization', admin.auth),
        404,
        'not_found',
      );
      for (const task of [tagged, plain]) {
        expectProblem(await service.http.get(`/tasks/${task.id}`).set('Authorization', admin.auth), 404, 'not_found');
      }
      expectProblem(await service.http.get(`/tags/${tag.id}`).set('Authorization', admin.auth), 404, 'not_found');
      const kept = await service.http.get(`/tasks/${erinsTask.id}`).set('Authorization', erin.auth).expect(200);
      // Erin's task lost its assignee and one attachment: a new version.
      expect(TaskSchema.parse(kept.body)).toMatchObject({
        id: erinsTask.id,
        ownerId: erin.user.id,
        assigneeId: null,
        version: erinsTask.version + 3,
      });

      for (const attachment of [onOwnTask, onErinsTask]) {
        expectProblem(
          await service.http.get(`/attachments/${attachment.id}`).set('Authorization', admin.auth),
          404,
          'not_found',
        );
      }
      const remaining = await service.http
        .get(`/tasks/${erinsTask.id}/attachments`)
        .set('Authorization', erin.auth)
        .expect(200);
      expect(ids(listOf(AttachmentSchema).parse(remaining.body).items)).toEqual([erinsOwn.id]);
      for (const key of goneKeys) expect(await service.ctx.attachmentStorage.open(key)).toBeUndefined();
      const keptBytes = await service.ctx.attachmentStorage.open(keptKey);
      expect(keptBytes).toBeDefined();
      keptBytes?.destroy();

      const db = service.ctx.db.sql;
      expect(await countOwned(db, 'tags', dave.user.id)).toBe(0);
      expect(await countOf(db, tables.selectFrom('sessions').where('user_id', '=', dave.user.id))).toBe(0);
      // The email is free again.
      await registerUser(service, { email: dave.email });
    });

    it('lets a user delete themself', async () => {
      const frank = await registerUser(service);
      await createTask(service, frank);
      await service.http.delete(`/users/${frank.user.id}`).set('Authorization', frank.auth).expect(204);
      expectProblem(await service.http.get('/auth/me').set('Authorization', frank.auth), 401, 'unauthenticated');
      expect(await countOwned(service.ctx.db.sql, 'tasks', frank.user.id)).toBe(0);
    });

    it('hides other users (404) and tells malformed ids (400) from unknown ones (404)', async () => {
      const alice = await registerUser(service);
      const bob = await registerUser(service);
      expectProblem(
        await service.http.delete(`/users/${bob.user.id}`).set('Authorization', alice.auth),
        404,
        'not_found',
      );
      expectProblem(
        await service.http.delete(`/users/${admin.user.id}`).set('Authorization', alice.auth),
        404,
        'not_found',
      );
      await service.http.get('/auth/me').set('Authorization', bob.auth).expect(200);
      expectProblem(await service.http.delete(`/users/${uuidv7()}`).set('Authorization', admin.auth), 404, 'not_found');
      expectProblem(await service.http.delete('/users/123').set('Authorization', admin.auth), 400, 'validation_failed');
      expectProblem(await service.http.delete(`/users/${bob.user.id}`), 401, 'unauthenticated');
    });
  });
});

describe('the last admin', () => {
  const service = serviceForFile();
  const admin = userForFile(service, { admin: true });

  it('cannot be demoted or deleted', async () => {
    expect(await adminCount(service)).toBe(1);
    const path = `/users/${admin.user.id}`;
    expectProblem(
      await service.http.patch(path).set('Authorization', admin.auth).send({ role: 'user' }),
      409,
      'last_admin',
    );
    expectProblem(
      await service.http
        .put(path)
        .set('Authorization', admin.auth)
        .send({ email: admin.email, name: 'Still Admin', role: 'user' }),
      409,
      'last_admin',
    );
    expectProblem(await service.http.delete(path).set('Authorization', admin.auth), 409, 'last_admin');
    const self = await service.http.get(path).set('Authorization', admin.auth).expect(200);
    expect(UserSchema.parse(self.body)).toMatchObject({ role: 'admin', name: admin.user.name });
  });

  it('can step down once another admin exists, who is then the last', async () => {
    const email = uniqueEmail('second-admin');
    await service.http
      .post('/users')
      .set('Authorization', admin.auth)
      .send({ email, password: 'second admin pass', name: 'Second', role: 'admin' })
      .expect(201);
    const second = await login(service, email, 'second admin pass');
    const demoted = await service.http
      .patch(`/users/${admin.user.id}`)
      .set('Authorization', admin.auth)
      .send({ role: 'user' })
      .expect(200);
    expect(UserSchema.parse(demoted.body).role).toBe('user');
    expectProblem(
      await service.http.delete(`/users/${second.user.id}`).set('Authorization', second.auth),
      409,
      'last_admin',
    );
    expectProblem(
      await service.http.patch(`/users/${second.user.id}`).set('Authorization', second.auth).send({ role: 'user' }),
      409,
      'last_admin',
    );
    // Deleting a plain user is unaffected.
    await service.http.delete(`/users/${admin.user.id}`).set('Authorization', second.auth).expect(204);
    expect(await adminCount(service)).toBe(1);
  });
});

describe('two admins removing each other at once', () => {
  const service = serviceForFile();
  let survivor: { user: User; auth: string };
  beforeAll(async () => {
    const first = await registerAdmin(service);
    survivor = first;
  });

  /** Makes a second admin with survivor's help, so that exactly two exist. */
  async function partner() {
    const email = uniqueEmail('partner');
    await service.http
      .post('/users')
      .set('Authorization', survivor.auth)
      .send({ email, password: 'partner password', name: 'Partner', role: 'admin' })
      .expect(201);
    expect(await adminCount(service)).toBe(2);
    return login(service, email, 'partner password');
  }

  async function remainingAdmin(candidates: { user: User; auth: string }[]) {
    const admins = await service.ctx.db.sql.all(tables.selectFrom('users').select('id').where('role', '=', 'admin'));
    expect(admins.length).toBe(1);
    const next = candidates.find((c) => c.user.id === admins[0]?.id);
    expect(next).toBeDefined();
    return next ?? survivor;
  }

  it('never leaves zero admins when both delete the other', async () => {
    for (let round = 0; round < 4; round++) {
      const other = await partner();
      const results = await Promise.all([
        service.http.delete(`/users/${other.user.id}`).set('Authorization', survivor.auth),
        service.http.delete(`/users/${survivor.user.id}`).set('Authorization', other.auth),
      ]);
      const statuses = results.map((r) => r.status);
      for (const status of statuses) expect([204, 401, 404, 409]).toContain(status);
      expect(statuses.filter((s) => s === 204)).toHaveLength(1);
      survivor = await remainingAdmin([survivor, other]);
      await service.http.get('/users').set('Authorization', survivor.auth).expect(200);
    }
  });

  it('never leaves zero admins when both demote the other', async () => {
    for (let round = 0; round < 4; round++) {
      const other = await partner();
      const results = await Promise.all([
        service.http.patch(`/users/${other.user.id}`).set('Authorization', survivor.auth).send({ role: 'user' }),
        service.http.patch(`/users/${survivor.user.id}`).set('Authorization', other.auth).send({ role: 'user' }),
      ]);
      const statuses = results.map((r) => r.status);
      for (const status of statuses) expect([200, 403, 404, 409]).toContain(status);
      expect(statuses.filter((s) => s === 200)).toHaveLength(1);
      survivor = await remainingAdmin([survivor, other]);
      await service.http.get('/users').set('Authorization', survivor.auth).expect(200);
    }
  });
});
