// Inputs found by review to crash a request, slip past a limit or be misread; each must answer in
// the documented format and change nothing it should not.
import { describe, expect, it } from 'vitest';
import { AttachmentSchema } from '../contract/attachments.js';
import { listOf } from '../contract/common.js';
import { TaskSchema } from '../contract/tasks.js';
import { serviceForFile } from './support/app.js';
import { errorPaths, expectProblem } from './support/problems.js';
import { createTask, getTask } from './support/tasks.js';
import { loginRequest, registerUser, userForFile } from './support/users.js';

const service = serviceForFile({ LOGIN_MAX_FAILURES_PER_ACCOUNT: '5' });
const alice = userForFile(service);
const bob = userForFile(service);

describe('text the database cannot store', () => {
  it('refuses a lone surrogate in any stored text with 400 naming the field', async () => {
    // JSON.stringify keeps a lone surrogate as the escape \ud800: valid JSON, not valid Unicode.
    const title = JSON.stringify({ title: 'a\ud800b' });
    expect(title).toContain('\\ud800');
    const task = await service.http
      .post('/tasks')
      .set('Authorization', alice.auth)
      .set('Content-Type', 'application/json')
      .send(title);
    expectProblem(task, 400, 'validation_failed');
    expect(errorPaths(task.body)).toEqual(['body.title']);
    const tag = await service.http
      .post('/tags')
      .set('Authorization', alice.auth)
      .set('Content-Type', 'application/json')
      .send(JSON.stringify({ name: '\udc00' }));
    expect(errorPaths(tag.body)).toEqual(['body.name']);
    const search = await service.http.get('/tasks?q=%ED%A0%80').set('Authorization', alice.auth);
    expect(search.status).toBeLessThan(500);
  });
});

describe('malformed requests', () => {
  it('answers a broken %-escape in the path with 400, not 500', async () => {
    expectProblem(await service.http.get('/tasks/%E0%A4%A').set('Authorization', alice.auth), 400, 'validation_failed');
  });

  it('reads a scalar JSON body as valid JSON of the wrong shape', async () => {
    for (const body of ['"x"', 'null', '42']) {
      const res = await service.http
        .post('/tasks')
        .set('Authorization', alice.auth)
        .set('Content-Type', 'application/json')
        .send(body);
      expectProblem(res, 400, 'validation_failed');
    }
  });

  it('refuses query parameters on operations that take none', async () => {
    const res = await service.http.get(`/users/${alice.user.id}?bogus=1`).set('Authorization', alice.auth);
    expectProblem(res, 400, 'validation_failed');
    expect(errorPaths(res.body)).toEqual(['query.bogus']);
  });

  it('answers a forged cursor with an out-of-range date with 400', async () => {
    const cursor = Buffer.from(
      JSON.stringify({ s: '-createdAt', v: '0000-01-01T00:00:00Z', id: alice.user.id }),
    ).toString('base64url');
    expectProblem(
      await service.http.get(`/tasks?cursor=${cursor}`).set('Authorization', alice.auth),
      400,
      'validation_failed',
    );
  });
});

describe('identifiers and credentials', () => {
  it('reads an id in upper case as the same id', async () => {
    const own = await service.http
      .get(`/users/${alice.user.id.toUpperCase()}`)
      .set('Authorization', alice.auth)
      .expect(200);
    expect(own.body.id).toBe(alice.user.id);
  });

  it('takes the Bearer scheme in any case', async () => {
    await service.http.get('/auth/me').set('Authorization', `bearer ${alice.accessToken}`).expect(200);
  });

  it('refuses role from a non-admin with 400, even their current role, and changes nothing', async () => {
    for (const [method, body] of [
      ['put', { email: bob.email, name: 'Bob', role: 'user' }],
      ['patch', { role: 'user' }],
      ['patch', { role: 'admin' }],
    ] as const) {
      const res = await service.http[method](`/users/${bob.user.id}`).set('Authorization', bob.auth).send(body);
      expectProblem(res, 400, 'validation_failed');
      expect(errorPaths(res.body)).toEqual(['body.role']);
    }
    expect((await service.http.get('/auth/me').set('Authorization', bob.auth).expect(200)).body.role).toBe('user');
  });

  it('lets exactly the allowed number of simultaneous wrong guesses through the login throttle', async () => {
    const victim = await registerUser(service);
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => loginRequest(service, victim.email, 'wrong password')),
    );
    const statuses = answers.map((res) => res.status).sort();
    expect(statuses.filter((s) => s === 401)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(15);
  });
});

describe('writes that take', () => {
  it('answers an assignee who unassigns themselves with the saved task', async () => {
    const task = await createTask(service, alice, { assigneeId: bob.user.id });
    const res = await service.http
      .patch(`/tasks/${task.id}`)
      .set('Authorization', bob.auth)
      .send({ assigneeId: null, title: 'handed back' })
      .expect(200);
    expect(TaskSchema.parse(res.body)).toMatchObject({
      id: task.id,
      assigneeId: null,
      title: 'handed back',
      version: 2,
    });
    expectProblem(await service.http.get(`/tasks/${task.id}`).set('Authorization', bob.auth), 404, 'not_found');
    expect((await getTask(service, alice, task.id)).title).toBe('handed back');
  });

  it('stores a file whose name cannot be shortened as "file", and lists it', async () => {
    const task = await createTask(service, alice);
    const name = `a${'\u0301'.repeat(200)}`; // one character of 401 bytes: no cut keeps any of it
    const res = await service.http
      .post(`/tasks/${task.id}/attachments`)
      .set('Authorization', alice.auth)
      .attach('file', Buffer.from('hello'), { filename: name, contentType: 'text/plain' })
      .expect(201);
    expect(AttachmentSchema.parse(res.body).filename).toBe('file');
    const list = await service.http.get(`/tasks/${task.id}/attachments`).set('Authorization', alice.auth).expect(200);
    expect(
      listOf(AttachmentSchema)
        .parse(list.body)
        .items.map((a) => a.filename),
    ).toEqual(['file']);
  });

  it('serves downloads as inert content', async () => {
    const task = await createTask(service, alice);
    const uploaded = await service.http
      .post(`/tasks/${task.id}/attachments`)
      .set('Authorization', alice.auth)
      .attach('file', Buffer.from('<script>alert(1)</script>'), { filename: 'page.html', contentType: 'text/html' })
      .expect(201);
    const download = await service.http
      .get(`/attachments/${uploaded.body.id}/content`)
      .set('Authorization', alice.auth)
      .expect(200);
    expect(download.headers['content-security-policy']).toBe("default-src 'none'; sandbox");
    expect(download.headers['content-disposition']).toMatch(/^attachment;/);
  });
});
