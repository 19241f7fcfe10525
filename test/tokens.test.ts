import { createHash } from 'node:crypto';
import { isAppRoute, type AppRoute, type AppRouter } from '@ts-rest/core';
import { pino } from 'pino';
import request from 'supertest';
import { describe, expect, it } from 'vitest';
import {
  contract,
  isLoginOnly,
  isPublicRoute,
  PersonalAccessTokenSchema,
  scopeOf,
  SCOPES,
  type Scope,
} from '../contract/index.js';
import { buildApp } from '../server/app.js';
import { tables } from '../server/db/query.js';
import { createContext } from '../server/bootstrap.js';
import { serviceForFile } from './support/app.js';
import { eventCount, openSse } from './support/sse.js';
import { createPersonalToken } from './support/personal-tokens.js';
import { countOf } from './support/rows.js';
import { expectProblem } from './support/problems.js';
import { registerAdmin, registerUser, type TestUser, userForFile } from './support/users.js';

const service = serviceForFile();
const ada = userForFile(service);
const admin = userForFile(service, { admin: true });

const TOKEN_FORMAT = /^tsk_pat_[0-9A-Za-z]{43}[0-9A-Za-z]{6}$/;

/** A personal access token as stored, by id; throws when there is none. */
async function storedToken(id: string) {
  const row = await service.ctx.db.sql.first(
    tables.selectFrom('personal_access_tokens').selectAll().where('id', '=', id),
  );
  if (!row) throw new Error(`no personal access token ${id} in the database`);
  return row;
}

function routesOf(router: AppRouter, into: AppRoute[] = []): AppRoute[] {
  for (const entry of Object.values(router)) {
    if (isAppRoute(entry)) into.push(entry);
    else routesOf(entry, into);
  }
  return into;
}

describe('scopes in the contract', () => {
  it('every operation that needs a token declares the scope a personal access token needs, or that it needs a login', () => {
    const undeclared = routesOf(contract)
      .filter((route) => !isPublicRoute(route) && !isLoginOnly(route) && scopeOf(route) === undefined)
      .map((route) => `${route.method} ${route.path}`);
    expect(undeclared).toEqual([]);
  });

  it("the OpenAPI document names each operation's scope (x-scopes) and says it in the text the docs page shows", async () => {
    const document = (await service.http.get('/openapi.json').expect(200)).body as {
      paths: Record<string, Record<string, { 'x-scopes'?: string[]; description?: string; security?: unknown[] }>>;
    };
    const tasksList = document.paths['/tasks']?.get;
    expect(tasksList?.['x-scopes']).toEqual(['tasks:read']);
    expect(tasksList?.description).toContain('`tasks:read`');
    expect(document.paths['/tokens']?.post?.['x-scopes']).toEqual([]);
    expect(document.paths['/healthz']?.get?.['x-scopes']).toBeUndefined();
    for (const [path, operations] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        if ((operation.security ?? []).length > 0) expect(operation['x-scopes'], `${method} ${path}`).toBeDefined();
      }
    }
  });
});

describe('managing tokens', () => {
  it('creates a token shown once, in the documented format, stored only as its SHA-256 hash', async () => {
    const res = await service.http
      .post('/tokens')
      .set('Authorization', ada.auth)
      .send({ name: 'report script', scopes: ['tasks:read'], expiresInDays: 7 })
      .expect(201);
    const { token, id, prefix, expiresAt, createdAt, lastUsedAt } = res.body as {
      token: string;
      id: string;
      prefix: string;
      expiresAt: string;
      createdAt: string;
      lastUsedAt: null;
    };
    expect(token).toMatch(TOKEN_FORMAT);
    expect(prefix).toBe(token.slice(0, 12));
    expect(res.headers.location).toBe(`/tokens/${id}`);
    expect(lastUsedAt).toBeNull();
    expect(Date.parse(expiresAt) - Date.parse(createdAt)).toBe(7 * 24 * 3600 * 1000);

    const row = await storedToken(id);
    expect(row.token_hash).toBe(createHash('sha256').update(token).digest('hex'));
    expect(JSON.stringify(row)).not.toContain(token.slice(8));

    const shown = await service.http.get(`/tokens/${id}`).set('Authorization', ada.auth).expect(200);
    expect(PersonalAccessTokenSchema.strict().parse(shown.body).scopes).toEqual(['tasks:read']);
    const list = await service.http.get('/tokens').set('Authorization', ada.auth).expect(200);
    expect(JSON.stringify(list.body)).not.toContain(token);
    expect((list.body as { items: { id: string }[] }).items.map((item) => item.id)).toContain(id);
  });

  it('revoking a token removes it from the list and refuses it at once', async () => {
    const pat = await createPersonalToken(service, ada, ['tasks:read']);
    await service.http.get('/tasks').set('Authorization', pat.auth).expect(200);
    await service.http.delete(`/tokens/${pat.id}`).set('Authorization', ada.auth).expect(204);
    const list = await service.http.get('/tokens').set('Authorization', ada.auth).expect(200);
    expect((list.body as { items: { id: string }[] }).items.map((item) => item.id)).not.toContain(pat.id);
    const refused = await service.http.get('/tasks').set('Authorization', pat.auth);
    expect(expectProblem(refused, 401, 'unauthenticated').detail).toMatch(/revoked or unknown/);
    expect(refused.headers['www-authenticate']).toMatch(/^Bearer error="invalid_token"/);
  });

  it("another user's token is 404 to get and to revoke, and stays usable", async () => {
    const pat = await createPersonalToken(service, admin, ['tasks:read']);
    expectProblem(await service.http.get(`/tokens/${pat.id}`).set('Authorization', ada.auth), 404, 'not_found');
    expectProblem(await service.http.delete(`/tokens/${pat.id}`).set('Authorization', ada.auth), 404, 'not_found');
    await service.http.get('/tasks').set('Authorization', pat.auth).expect(200);
    expectProblem(
      await service.http.get('/tokens').query({ userId: admin.user.id }).set('Authorization', ada.auth),
      403,
      'forbidden',
    );
    const asAdmin = await service.http
      .get('/tokens')
      .query({ userId: ada.user.id })
      .set('Authorization', admin.auth)
      .expect(200);
    expect((asAdmin.body as { items: unknown[] }).items.length).toBeGreaterThan(0);
  });

  it('bad input is the documented 400 and creates nothing', async () => {
    const before = await countOf(service.ctx.db.sql, tables.selectFrom('personal_access_tokens'));
    for (const body of [
      { name: 'x', scopes: ['tasks:delete'] },
      { name: 'x', scopes: [] },
      { name: '', scopes: ['tasks:read'] },
      { name: 'x', scopes: ['tasks:read'], expiresInDays: 0 },
      { name: 'x', scopes: ['tasks:read'], expiresInDays: 367 },
      { name: 'x', scopes: ['tasks:read'], token: 'tsk_pat_mine' },
    ]) {
      expectProblem(
        await service.http.post('/tokens').set('Authorization', ada.auth).send(body),
        400,
        'validation_failed',
      );
    }
    expect(await countOf(service.ctx.db.sql, tables.selectFrom('personal_access_tokens'))).toBe(before);
  });

  it('only an administrator may grant the admin scope', async () => {
    expectProblem(
      await service.http
        .post('/tokens')
        .set('Authorization', ada.auth)
        .send({ name: 'x', scopes: ['admin'] }),
      403,
      'forbidden',
    );
    await createPersonalToken(service, admin, ['admin']);
  });

  it('a personal access token cannot manage tokens, log out or change a password (403 forbidden)', async () => {
    const pat = await createPersonalToken(
      service,
      ada,
      [...SCOPES].filter((scope) => scope !== 'admin'),
    );
    expectProblem(
      await service.http
        .post('/tokens')
        .set('Authorization', pat.auth)
        .send({ name: 'x', scopes: ['tasks:read'] }),
      403,
      'forbidden',
    );
    expectProblem(await service.http.get('/tokens').set('Authorization', pat.auth), 403, 'forbidden');
    expectProblem(await service.http.delete(`/tokens/${pat.id}`).set('Authorization', pat.auth), 403, 'forbidden');
    expectProblem(await service.http.post('/auth/logout').set('Authorization', pat.auth), 403, 'forbidden');
    const password = await service.http
      .patch(`/users/${ada.user.id}`)
      .set('Authorization', pat.auth)
      .send({ password: 'a brand new password', currentPassword: ada.password });
    expect(expectProblem(password, 403, 'forbidden').detail).toMatch(/password/);
    // The password did not change: the old one still logs in.
    await service.http.post('/auth/login').send({ email: ada.email, password: ada.password }).expect(200);
    await service.http
      .patch(`/users/${ada.user.id}`)
      .set('Authorization', pat.auth)
      .send({ name: 'Ada via token' })
      .expect(200);
  });

  it('a personal access token cannot change the email or delete the account (403 forbidden), only the rest of the profile', async () => {
    const owner = await registerUser(service);
    const pat = await createPersonalToken(service, owner, ['account:write']);
    const newEmail = `taken-over-${owner.email}`;
    const patched = await service.http
      .patch(`/users/${owner.user.id}`)
      .set('Authorization', pat.auth)
      .send({ email: newEmail });
    expect(expectProblem(patched, 403, 'forbidden').detail).toMatch(/email/);
    const replaced = await service.http
      .put(`/users/${owner.user.id}`)
      .set('Authorization', pat.auth)
      .send({ email: newEmail, name: 'Renamed' });
    expect(expectProblem(replaced, 403, 'forbidden').detail).toMatch(/email/);
    const deleted = await service.http.delete(`/users/${owner.user.id}`).set('Authorization', pat.auth);
    expect(expectProblem(deleted, 403, 'forbidden').detail).toMatch(/delete/);
    // Nothing changed: the owner still logs in with the old email, and the name is theirs to change by token.
    await service.http.post('/auth/login').send({ email: owner.email, password: owner.password }).expect(200);
    const same = await service.http
      .put(`/users/${owner.user.id}`)
      .set('Authorization', pat.auth)
      .send({ email: owner.email.toUpperCase(), name: 'Renamed by token' })
      .expect(200);
    expect(same.body).toMatchObject({ email: owner.email, name: 'Renamed by token' });
    // An administrator's token may not do it to someone else either: those need a login.
    const adminPat = await createPersonalToken(service, admin, ['admin', 'account:write']);
    expectProblem(
      await service.http.patch(`/users/${owner.user.id}`).set('Authorization', adminPat.auth).send({ email: newEmail }),
      403,
      'forbidden',
    );
    expectProblem(
      await service.http.delete(`/users/${owner.user.id}`).set('Authorization', adminPat.auth),
      403,
      'forbidden',
    );
    await service.http.get(`/users/${owner.user.id}`).set('Authorization', admin.auth).expect(200);
  });

  it("an admin setting a user's password revokes that user's tokens; changing your own keeps them", async () => {
    const owner = await registerUser(service);
    const pat = await createPersonalToken(service, owner, ['account:read']);
    const otherSession = await service.http
      .post('/auth/login')
      .send({ email: owner.email, password: owner.password })
      .expect(200);
    await service.http
      .patch(`/users/${owner.user.id}`)
      .set('Authorization', owner.auth)
      .send({ password: 'my own new password', currentPassword: owner.password })
      .expect(200);
    // Their own change ends their other sessions, not their tokens.
    await service.http.get('/auth/me').set('Authorization', pat.auth).expect(200);
    expectProblem(
      await service.http
        .get('/auth/me')
        .set('Authorization', `Bearer ${(otherSession.body as { accessToken: string }).accessToken}`),
      401,
      'unauthenticated',
    );
    await service.http
      .patch(`/users/${owner.user.id}`)
      .set('Authorization', admin.auth)
      .send({ password: 'set by the administrator' })
      .expect(200);
    expect(
      expectProblem(await service.http.get('/auth/me').set('Authorization', pat.auth), 401, 'unauthenticated').detail,
    ).toMatch(/revoked or unknown/);
    const list = await service.http.get('/tokens').query({ userId: owner.user.id }).set('Authorization', admin.auth);
    expect((list.body as { items: unknown[] }).items).toEqual([]);
  });

  it('at most 50 live tokens a user: the 51st is 409 quota_exceeded', async () => {
    const user = await registerUser(service);
    for (let i = 0; i < 50; i++) await createPersonalToken(service, user, ['tasks:read'], `token ${i}`);
    expectProblem(
      await service.http
        .post('/tokens')
        .set('Authorization', user.auth)
        .send({ name: 'one too many', scopes: ['tasks:read'] }),
      409,
      'quota_exceeded',
    );
    const list = await service.http.get('/tokens').set('Authorization', user.auth).expect(200);
    expect((list.body as { items: unknown[] }).items).toHaveLength(50);
  });
});

describe('authenticating with a token', () => {
  /** Per scope: a request it allows, and one it does not with the scope that one needs. */
  const cases: Record<
    Scope,
    {
      allowed: (user: TestUser) => request.Test;
      refused: (user: TestUser) => request.Test;
      needs: Scope;
      owner?: 'admin';
    }
  > = {
    'tasks:read': {
      allowed: () => service.http.get('/tasks'),
      refused: () => service.http.post('/tasks').send({ title: 'no' }),
      needs: 'tasks:write',
    },
    'tasks:write': {
      allowed: () => service.http.post('/tasks').send({ title: 'by token' }),
      refused: () => service.http.get('/tags'),
      needs: 'tags:read',
    },
    'projects:read': {
      allowed: () => service.http.get('/projects'),
      refused: () => service.http.post('/projects').send({ name: 'no' }),
      needs: 'projects:write',
    },
    'projects:write': {
      allowed: () => service.http.post('/projects').send({ name: 'by token' }),
      refused: () => service.http.get('/tasks'),
      needs: 'tasks:read',
    },
    'tags:read': {
      allowed: () => service.http.get('/tags'),
      refused: () => service.http.post('/tags').send({ name: 'no' }),
      needs: 'tags:write',
    },
    'tags:write': {
      allowed: () => service.http.post('/tags').send({ name: `tag ${Math.random()}` }),
      refused: () => service.http.get('/tasks'),
      needs: 'tasks:read',
    },
    'webhooks:read': {
      allowed: () => service.http.get('/webhooks'),
      refused: () => service.http.delete('/webhooks/0193a5c6-0e1f-7a2b-8c3d-4e5f6a7b8c9d'),
      needs: 'webhooks:write',
    },
    'webhooks:write': {
      allowed: () => service.http.get('/webhooks'),
      refused: () => service.http.get('/changes'),
      needs: 'events:read',
    },
    'events:read': {
      allowed: () => service.http.get('/changes'),
      refused: () => service.http.get('/webhooks'),
      needs: 'webhooks:read',
    },
    'account:read': {
      allowed: () => service.http.get('/auth/me'),
      refused: (user) => service.http.patch(`/users/${user.user.id}`).send({ name: 'no' }),
      needs: 'account:write',
    },
    'account:write': {
      allowed: (user) => service.http.patch(`/users/${user.user.id}`).send({ name: 'Renamed by token' }),
      refused: () => service.http.get('/tasks'),
      needs: 'tasks:read',
    },
    admin: {
      allowed: () => service.http.get('/users'),
      refused: () => service.http.get('/tasks'),
      needs: 'tasks:read',
      owner: 'admin',
    },
  };

  for (const [scope, { allowed, refused, needs, owner }] of Object.entries(cases)) {
    it(`${scope}: allows what it names, and is 403 insufficient_scope with RFC 6750's challenge elsewhere`, async () => {
      const user = owner === 'admin' ? admin : ada;
      const pat = await createPersonalToken(service, user, [scope as Scope]);
      const ok = await allowed(user).set('Authorization', pat.auth);
      expect(ok.status, ok.text).toBeLessThan(300);
      const res = await refused(user).set('Authorization', pat.auth);
      expectProblem(res, 403, 'insufficient_scope');
      expect(res.headers['www-authenticate']).toMatch(
        new RegExp(`^Bearer error="insufficient_scope", scope="${needs}"`),
      );
    });
  }

  it('an expired token is 401 saying expired', async () => {
    const pat = await createPersonalToken(service, ada, ['tasks:read']);
    await service.ctx.db.sql.write(
      tables
        .updateTable('personal_access_tokens')
        .set({ expires_at: new Date(Date.now() - 1000) })
        .where('id', '=', pat.id),
    );
    const res = await service.http.get('/tasks').set('Authorization', pat.auth);
    expect(expectProblem(res, 401, 'unauthenticated').detail).toMatch(/expired/);
    expect(res.headers['www-authenticate']).toMatch(/^Bearer error="invalid_token", error_description=".*expired/);
  });

  it('a token whose checksum does not match is refused without a look-up (401 malformed)', async () => {
    const pat = await createPersonalToken(service, ada, ['tasks:read']);
    const last = pat.token.at(-1) === 'a' ? 'b' : 'a';
    // A typo changes a character: one already 'x' becomes 'y' (the token is random).
    const inner = pat.token[20] === 'x' ? 'y' : 'x';
    for (const typo of [
      `${pat.token.slice(0, -1)}${last}`,
      `${pat.token.slice(0, 20)}${inner}${pat.token.slice(21)}`,
      pat.token.slice(0, -1),
      'tsk_pat_short',
    ]) {
      const res = await service.http.get('/tasks').set('Authorization', `Bearer ${typo}`);
      expect(expectProblem(res, 401, 'unauthenticated').detail).toMatch(/malformed/);
    }
  });

  it('lastUsedAt is written on use, at most once a minute', async () => {
    const pat = await createPersonalToken(service, ada, ['tasks:read']);
    await service.http.get('/tasks').set('Authorization', pat.auth).expect(200);
    const first = (await storedToken(pat.id)).last_used_at;
    expect(first).not.toBeNull();
    await service.http.get('/tasks').set('Authorization', pat.auth).expect(200);
    const second = (await storedToken(pat.id)).last_used_at;
    expect(second?.getTime()).toBe(first?.getTime());
    // A minute later, the next use writes it again.
    await service.ctx.db.sql.write(
      tables
        .updateTable('personal_access_tokens')
        .set({ last_used_at: new Date(Date.now() - 61_000) })
        .where('id', '=', pat.id),
    );
    await service.http.get('/tasks').set('Authorization', pat.auth).expect(200);
    const third = (await storedToken(pat.id)).last_used_at;
    expect(third!.getTime()).toBeGreaterThan(Date.now() - 30_000);
  });

  it("a token acts with no more than its owner's rights: an admin's token without the admin scope sees only its owner's tasks", async () => {
    const adasTask = (
      await service.http.post('/tasks').set('Authorization', ada.auth).send({ title: 'Ada only' }).expect(201)
    ).body as { id: string };
    const pat = await createPersonalToken(service, admin, ['tasks:read']);
    expectProblem(await service.http.get(`/tasks/${adasTask.id}`).set('Authorization', pat.auth), 404, 'not_found');
    const withAdmin = await createPersonalToken(service, admin, ['tasks:read', 'admin']);
    await service.http.get(`/tasks/${adasTask.id}`).set('Authorization', withAdmin.auth).expect(200);
  });

  it("a demoted admin's admin scope stops at once (403 forbidden)", async () => {
    const former = await registerAdmin(service);
    const pat = await createPersonalToken(service, former, ['admin', 'tasks:read']);
    await service.http.get('/users').set('Authorization', pat.auth).expect(200);
    await service.http
      .patch(`/users/${former.user.id}`)
      .set('Authorization', admin.auth)
      .send({ role: 'user' })
      .expect(200);
    expectProblem(await service.http.get('/users').set('Authorization', pat.auth), 403, 'forbidden');
    await service.http.get('/tasks').set('Authorization', pat.auth).expect(200);
  });

  it("a deleted user's tokens stop at once on every instance", async () => {
    const doomed = await registerUser(service);
    const pat = await createPersonalToken(service, doomed, ['tasks:read']);
    // A second instance of the service over the same database.
    const other = request(buildApp(await createContext(service.ctx.config, service.ctx.db, pino({ level: 'silent' }))));
    await other.get('/tasks').set('Authorization', pat.auth).expect(200);
    await service.http.delete(`/users/${doomed.user.id}`).set('Authorization', doomed.auth).expect(204);
    expect(
      expectProblem(await other.get('/tasks').set('Authorization', pat.auth), 401, 'unauthenticated').detail,
    ).toMatch(/revoked or unknown/);
  });

  it('a token value is never logged, used or refused', async () => {
    const lines: string[] = [];
    const logger = pino({ level: 'trace' }, { write: (line: string) => void lines.push(line) });
    const logged = request(buildApp(await createContext(service.ctx.config, service.ctx.db, logger)));
    const pat = await createPersonalToken(service, ada, ['tasks:read']);
    await logged.get('/tasks').set('Authorization', pat.auth).expect(200);
    await logged.post('/tasks').set('Authorization', pat.auth).send({ title: 'x' }).expect(403);
    await logged
      .get('/tasks')
      // The last character changed, whatever it was (a '0' replaced by '0' would leave the token whole).
      .set('Authorization', `Bearer ${pat.token.slice(0, -1)}${pat.token.endsWith('0') ? '1' : '0'}`)
      .expect(401);
    const created = await logged
      .post('/tokens')
      .set('Authorization', ada.auth)
      .send({ name: 'logged?', scopes: ['tasks:read'] })
      .expect(201);
    expect(lines.length).toBeGreaterThan(0);
    const text = lines.join('\n');
    expect(text).not.toContain(pat.token.slice(8, 30));
    expect(text).not.toContain((created.body as { token: string }).token.slice(8, 30));
  });
});

describe('the live stream with a token', () => {
  const served = serviceForFile({ EVENT_STREAM_HEARTBEAT_SECONDS: '1' }, { listen: true });

  it('stays open across heartbeats while the token lives, delivers events, and ends when the token is revoked', async () => {
    const owner = await registerUser(served);
    const pat = await createPersonalToken(served, owner, ['events:read', 'tasks:read']);
    const sse = await openSse(served.baseUrl, { Authorization: pat.auth });
    try {
      expect(sse.status).toBe(200);
      // Each heartbeat checks the streams' credentials: two of them pass and the stream is still open.
      await sse.until((frames) => frames.filter((f) => f.comment === 'heartbeat').length >= 2, 5_000);
      await served.http
        .post('/tasks')
        .set('Authorization', owner.auth)
        .send({ title: 'seen by the token' })
        .expect(201);
      await sse.until((frames) => eventCount(frames) === 1, 5_000);
      expect(sse.events()[0]?.type).toBe('task.created');
      await served.http.delete(`/tokens/${pat.id}`).set('Authorization', owner.auth).expect(204);
      await sse.ended;
    } finally {
      sse.close();
    }
  });

  it('delivers only the events the other scopes of the token let it read', async () => {
    const owner = await registerUser(served);
    const pat = await createPersonalToken(served, owner, ['events:read', 'tags:read']);
    const sse = await openSse(served.baseUrl, { Authorization: pat.auth });
    try {
      expect(sse.status).toBe(200);
      await served.http.post('/tasks').set('Authorization', owner.auth).send({ title: 'hidden' }).expect(201);
      await served.http
        .patch(`/users/${owner.user.id}`)
        .set('Authorization', owner.auth)
        .send({ name: 'Hidden' })
        .expect(200);
      await served.http.post('/tags').set('Authorization', owner.auth).send({ name: 'seen' }).expect(201);
      // Events come in log order: the task's and the account's would have come before the tag's.
      await sse.until((frames) => eventCount(frames) >= 1, 5_000);
      expect(sse.events().map((event) => event.type)).toEqual(['tag.created']);
    } finally {
      sse.close();
    }
  });
});
