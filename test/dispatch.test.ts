// How a request finds its contract operation: the paths Express's route patterns took (one
// trailing slash, any case, %-escapes in parameters) reach the same operation, and every other
// path or method answers the same problem as before.
import { describe, expect, it } from 'vitest';
import { TaskSchema } from '../contract/tasks.js';
import { serviceForFile } from './support/app.js';
import { errorPaths, expectProblem } from './support/problems.js';
import { createTask } from './support/tasks.js';
import { userForFile } from './support/users.js';

const service = serviceForFile();
const alice = userForFile(service);

describe('the operation a path reaches', () => {
  it('takes one trailing slash, upper case and %-escaped characters, with the parameter as given', async () => {
    const task = await createTask(service, alice, { title: 'routed' });
    const escaped = task.id.replace(/^(.)/, (c: string) => `%${c.charCodeAt(0).toString(16)}`);
    for (const path of [`/tasks/${task.id}`, `/tasks/${task.id}/`, `/TASKS/${task.id}`, `/tasks/${escaped}`]) {
      const res = await service.http.get(path).set('Authorization', alice.auth);
      expect(res.status, path).toBe(200);
      expect(TaskSchema.parse(res.body).id).toBe(task.id);
    }
    const list = await service.http.get('/tasks/').set('Authorization', alice.auth);
    expect(list.status).toBe(200);
  });

  it('serves HEAD by the GET operation: its status and headers, no body', async () => {
    const task = await createTask(service, alice);
    const res = await service.http.head(`/tasks/${task.id}`).set('Authorization', alice.auth);
    expect(res.status).toBe(200);
    expect(res.headers.etag).toBe(`"${task.version}"`);
    expect(res.text ?? '').toBe('');
  });

  it("answers JSON as Express's res.json did: UTF-8 declared, the length in bytes, and HEAD the same headers", async () => {
    const task = await createTask(service, alice, { title: 'naïve café ✓ 😀' });
    const got = await service.http.get(`/tasks/${task.id}`).set('Authorization', alice.auth);
    expect(got.status).toBe(200);
    expect(got.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(Number(got.headers['content-length'])).toBe(Buffer.byteLength(got.text));
    expect(Buffer.byteLength(got.text)).toBeGreaterThan(got.text.length);
    expect(TaskSchema.parse(JSON.parse(got.text)).title).toBe('naïve café ✓ 😀');
    const head = await service.http.head(`/tasks/${task.id}`).set('Authorization', alice.auth);
    expect(head.headers['content-type']).toBe(got.headers['content-type']);
    expect(head.headers['content-length']).toBe(got.headers['content-length']);
    const created = await service.http.post('/tasks').set('Authorization', alice.auth).send({ title: 'ü' });
    expect(created.status).toBe(201);
    expect(created.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(Number(created.headers['content-length'])).toBe(Buffer.byteLength(created.text));
  });

  it('hands the parameter decoded to validation: an escaped slash is a malformed id', async () => {
    const res = await service.http.get('/tasks/a%2Fb').set('Authorization', alice.auth);
    expectProblem(res, 400, 'validation_failed', '/tasks/a%2Fb');
    expect(errorPaths(res.body)).toEqual(['path.task_id']);
  });

  it('answers a broken %-escape with 400 whichever method, as soon as some route fits the path', async () => {
    for (const send of [
      () => service.http.get('/users/%E0%A4%A'),
      () => service.http.delete('/users/%ZZ'),
      () => service.http.post('/tasks/%ZZ'),
    ])
      expectProblem(await send().set('Authorization', alice.auth), 400, 'validation_failed');
  });
});

describe('paths and methods no operation takes', () => {
  const id = '0190a6d4-0000-7000-8000-000000000001';
  it.each([
    ['a longer path', `/tasks/${id}/nope`],
    ['an empty segment', `/tasks//${id}`],
    ['a doubled leading slash', `//tasks/${id}`],
    ['two trailing slashes', `/tasks/${id}//`],
    ['a literal in place of another', `/tasks/${id}/tag`],
    ['the root', '/'],
  ])('answers %s with 404 not_found', async (_what, path) => {
    expectProblem(await service.http.get(path).set('Authorization', alice.auth), 404, 'not_found');
  });

  it.each([
    [
      'POST /tasks/{id}',
      () => service.http.post(`/tasks/${id}`),
      `/tasks/${id}`,
      ['DELETE', 'GET', 'HEAD', 'PATCH', 'PUT'],
    ],
    ['PUT /tasks/{id}/tags', () => service.http.put(`/tasks/${id}/tags`), `/tasks/${id}/tags`, ['GET', 'HEAD']],
    ['PATCH /tasks', () => service.http.patch('/tasks/'), '/tasks/', ['GET', 'HEAD', 'POST']],
    [
      'GET /webhooks/{id}/deliveries/{id}/retry',
      () => service.http.get(`/webhooks/${id}/deliveries/${id}/retry`),
      `/webhooks/${id}/deliveries/${id}/retry`,
      ['POST'],
    ],
  ])('answers %s with 405 and the Allow of its path', async (_what, send, path, allowed) => {
    const res = await send().set('Authorization', alice.auth);
    expectProblem(res, 405, 'method_not_allowed', path);
    expect(String(res.headers.allow).split(/,\s*/).sort()).toEqual(allowed);
  });

  it('still reaches the routes served beside the contract: the docs assets, the metrics, the problem pages', async () => {
    expectProblem(await service.http.get('/docs/assets/0/none.js'), 404, 'not_found');
    const page = await service.http.get('/problems/not_found').set('Accept', 'text/html');
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    const json = await service.http.get('/problems/not_found');
    expect(json.status).toBe(200);
    expect(json.headers['content-type']).toMatch(/^application\/json/);
  });
});
