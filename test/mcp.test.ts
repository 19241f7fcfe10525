import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { MemberSchema, ProblemSchema, ProjectSchema, TagSchema, TaskSchema, type Scope } from '../contract/index.js';
import { serviceForFile } from './support/app.js';
import { readAllChanges } from './support/events.js';
import { createTask } from './support/tasks.js';
import { createPersonalToken } from './support/personal-tokens.js';
import { expectProblem } from './support/problems.js';
import { countTasks } from './support/rows.js';
import { registerAdmin, registerUser, type TestUser } from './support/users.js';

const served = serviceForFile({ CORS_ORIGINS: 'https://app.example.test' }, { listen: true });
let ada: TestUser;
let grace: TestUser;
const clients: Client[] = [];

beforeAll(async () => {
  ada = await registerUser(served);
  grace = await registerUser(served);
});
afterAll(async () => {
  for (const client of clients) await client.close();
});

/** The SDK's own client, connected (initialize) with `auth` as its Authorization header. */
async function connect(auth: string): Promise<Client> {
  const client = new Client({ name: 'task-service-tests', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${served.baseUrl}/mcp`), {
      requestInit: { headers: { Authorization: auth } },
    }),
  );
  clients.push(client);
  return client;
}

const TextContentSchema = z.object({
  content: z.array(z.object({ type: z.literal('text'), text: z.string() })).min(1),
});
/** The problem an error result carries as JSON text. */
function problemOf(result: unknown) {
  expect(result).toMatchObject({ isError: true });
  expect(result).not.toHaveProperty('structuredContent');
  return ProblemSchema.parse(JSON.parse(TextContentSchema.parse(result).content[0]!.text));
}

async function toolNames(client: Client): Promise<string[]> {
  return (await client.listTools()).tools.map((tool) => tool.name).sort();
}

describe('the MCP endpoint', () => {
  it('initializes with the SDK client and lists the tools derived from the contract', async () => {
    const client = await connect(ada.auth);
    expect(client.getServerVersion()?.name).toBe('task-service');
    const { tools } = await client.listTools();
    const create = tools.find((tool) => tool.name === 'tasks_create');
    expect(create?.description).toBe('Create a task owned by the caller (an unknown assignee or tag is a 400)');
    expect(create?.inputSchema.properties).toHaveProperty('title');
    expect(create?.inputSchema.properties).toHaveProperty('idempotencyKey');
    expect(create?.outputSchema?.properties).toHaveProperty('version');
    const update = tools.find((tool) => tool.name === 'tasks_update');
    expect(update?.inputSchema.properties).toHaveProperty('task_id');
    expect(update?.inputSchema.properties).toHaveProperty('ifMatch');
    expect(tools.find((tool) => tool.name === 'tasks_get')?.annotations).toMatchObject({ readOnlyHint: true });
    expect(tools.find((tool) => tool.name === 'tasks_delete')?.annotations).toMatchObject({
      destructiveHint: true,
      idempotentHint: true,
    });
    expect(tools.find((tool) => tool.name === 'tasks_replace')?.annotations).toMatchObject({ idempotentHint: true });
    const names = tools.map((tool) => tool.name);
    expect(names).toEqual(
      expect.arrayContaining([
        'task_tags_add',
        'task_tags_list',
        'tags_list',
        'webhooks_create',
        'changes_list',
        'users_get',
        'auth_me_get',
      ]),
    );
    // Login, tokens, uploads, downloads and the live stream are not tools.
    expect(
      names.filter((name) => /auth_(login|register|refresh|logout)|token|upload|content|events/.test(name)),
    ).toEqual([]);
  });

  it("tools/list shows only what the token's scopes allow", async () => {
    const sets: [Scope[], string[]][] = [
      [
        ['tasks:read'],
        [
          'attachments_get',
          'comments_get',
          'task_activity_list',
          'task_attachments_list',
          'task_comments_list',
          'task_relations_list',
          'task_tags_list',
          'tasks_get',
          'tasks_list',
          'user_tasks_list',
        ],
      ],
      [['tags:write'], ['tags_create', 'tags_delete', 'tags_get', 'tags_list', 'tags_update']],
      [['projects:read'], ['project_members_list', 'projects_get', 'projects_list']],
      [
        ['projects:write'],
        [
          'project_members_add',
          'project_members_delete',
          'project_members_list',
          'project_members_update',
          'projects_create',
          'projects_delete',
          'projects_get',
          'projects_list',
          'projects_update',
        ],
      ],
      [
        ['events:read', 'account:read'],
        ['auth_me_get', 'changes_list', 'users_get'],
      ],
    ];
    for (const [scopes, expected] of sets) {
      const pat = await createPersonalToken(served, ada, scopes);
      expect(await toolNames(await connect(pat.auth)), scopes.join(' ')).toEqual(expected);
    }
  });

  it('tools/list shows admin-only tools only to an administrator acting as one; calling one is an error result', async () => {
    const adminOnly = ['users_create', 'users_list'];
    const plain = await toolNames(await connect(ada.auth));
    expect(plain.filter((name) => adminOnly.includes(name))).toEqual([]);
    const admin = await registerAdmin(served);
    expect(await toolNames(await connect(admin.auth))).toEqual(expect.arrayContaining(adminOnly));
    // An administrator's token acts as one only with the admin scope.
    const withoutAdmin = await createPersonalToken(served, admin, ['tasks:read']);
    expect(await toolNames(await connect(withoutAdmin.auth))).not.toContain('users_list');
    const withAdmin = await createPersonalToken(served, admin, ['admin']);
    expect(await toolNames(await connect(withAdmin.auth))).toEqual(adminOnly);
    const refused = await (await connect(ada.auth)).callTool({ name: 'users_list', arguments: {} });
    expect(problemOf(refused)).toMatchObject({ code: 'not_found' });
  });

  it('path arguments are validated and encoded: `..` never reaches another operation', async () => {
    const client = await connect(ada.auth);
    const task = await createTask(served, ada, { title: 'Keep me' });
    const tag = TagSchema.parse(
      (await served.http.post('/tags').set('Authorization', ada.auth).send({ name: 'keep' }).expect(201)).body,
    );
    await served.http.post(`/tasks/${task.id}/tags/${tag.id}`).set('Authorization', ada.auth).expect(201);
    for (const tagId of ['..', `../../tags/${tag.id}`, '.', `${tag.id}/..`, `${tag.id}?x=1`]) {
      const result = await client.callTool({
        name: 'task_tags_remove',
        arguments: { task_id: task.id, tag_id: tagId },
      });
      const problem = problemOf(result);
      expect(problem, tagId).toMatchObject({ status: 400, code: 'validation_failed' });
      expect(problem.errors?.map((issue) => issue.path)).toEqual(['path.tag_id']);
    }
    const taskIds = ['..', `../tags/${tag.id}`];
    for (const taskId of taskIds) {
      const result = await client.callTool({ name: 'tasks_delete', arguments: { task_id: taskId } });
      expect(problemOf(result), taskId).toMatchObject({ status: 400, code: 'validation_failed' });
    }
    const kept = await served.http.get(`/tasks/${task.id}`).set('Authorization', ada.auth).expect(200);
    expect(TaskSchema.parse(kept.body).tags.map((t) => t.id)).toEqual([tag.id]);
    await served.http.get(`/tags/${tag.id}`).set('Authorization', ada.auth).expect(200);
  });

  it('an error result never carries the text of an internal exception: a header fetch would refuse is a validation error', async () => {
    const client = await connect(ada.auth);
    const task = await createTask(served, ada, { title: 'Headers' });
    const result = await client.callTool({
      name: 'tasks_update',
      arguments: { task_id: task.id, ifMatch: '"1"\r\nX-Injected: yes', status: 'done' },
    });
    const text = TextContentSchema.parse(result).content[0]!.text;
    expect(result.isError).toBe(true);
    expect(text).not.toMatch(/Headers|invalid header|TypeError|fetch|at .*\.js/i);
    const problem = problemOf(result);
    expect(problem).toMatchObject({ status: 400, code: 'validation_failed' });
    expect(problem.errors?.map((issue) => issue.path)).toEqual(['header.if-match']);
    expect(problem.requestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(
      TaskSchema.parse((await served.http.get(`/tasks/${task.id}`).set('Authorization', ada.auth)).body).status,
    ).toBe('todo');
  });

  it('a call that fails inside the service is the generic internal problem with its request id, not the exception', async () => {
    const client = await connect(ada.auth);
    const realFetch = globalThis.fetch;
    // The service's own call to its REST operation fails as a lost connection would; the client's calls to /mcp go through.
    const spy = vi
      .spyOn(globalThis, 'fetch')
      .mockImplementation((input, init) =>
        String(input instanceof Request ? input.url : input).endsWith('/mcp')
          ? realFetch(input, init)
          : Promise.reject(new Error('connect ECONNREFUSED 10.9.8.7:5432 (/srv/secret/path)')),
      );
    try {
      const result = await client.callTool({ name: 'tasks_list', arguments: {} });
      const text = TextContentSchema.parse(result).content[0]!.text;
      expect(text).not.toMatch(/ECONNREFUSED|10\.9\.8\.7|secret/);
      expect(problemOf(result)).toMatchObject({
        status: 500,
        code: 'internal',
        detail: 'An unexpected error occurred',
      });
      expect(problemOf(result).requestId).toMatch(/^[0-9a-f-]{36}$/);
    } finally {
      spy.mockRestore();
    }
  });

  it('a create runs through the REST handler: the same task, the same event as a REST create', async () => {
    const pat = await createPersonalToken(served, ada, ['tasks:write']);
    const client = await connect(pat.auth);
    const before = await readAllChanges(served, ada);
    const result = await client.callTool({
      name: 'tasks_create',
      arguments: { title: 'From an agent', priority: 'high' },
    });
    expect(result.isError).toBeFalsy();
    const task = TaskSchema.parse(result.structuredContent);
    expect(task).toMatchObject({ title: 'From an agent', priority: 'high', ownerId: ada.user.id });
    expect(JSON.parse(TextContentSchema.parse(result).content[0]!.text)).toEqual(result.structuredContent);
    const rest = TaskSchema.parse(
      (
        await served.http
          .post('/tasks')
          .set('Authorization', ada.auth)
          .send({ title: 'From REST', priority: 'high' })
          .expect(201)
      ).body,
    );
    await served.http.get(`/tasks/${task.id}`).set('Authorization', ada.auth).expect(200);

    const { events } = await readAllChanges(served, ada, before.cursor);
    const viaMcp = events.find((event) => event.type === 'task.created' && event.data.task.id === task.id);
    const viaRest = events.find((event) => event.type === 'task.created' && event.data.task.id === rest.id);
    expect(viaMcp).toBeDefined();
    expect(viaRest).toBeDefined();
    // The same event but for what differs between two tasks: id, title and times.
    const shape = (event: typeof viaMcp) => {
      const task = event?.type === 'task.created' ? event.data.task : undefined;
      return {
        type: event?.type,
        actorId: event?.actorId,
        task: { ...task, id: undefined, title: undefined, createdAt: undefined, updatedAt: undefined },
      };
    };
    expect(shape(viaMcp)).toEqual(shape(viaRest));
  });

  it("reading another user's task is a not_found error result", async () => {
    const gracesTask = TaskSchema.parse(
      (await served.http.post('/tasks').set('Authorization', grace.auth).send({ title: 'Private' }).expect(201)).body,
    );
    const client = await connect(ada.auth);
    const result = await client.callTool({ name: 'tasks_get', arguments: { task_id: gracesTask.id } });
    expect(problemOf(result)).toMatchObject({ status: 404, code: 'not_found' });
  });

  it('a validation error is an error result carrying the problem details, and nothing is created', async () => {
    const client = await connect(ada.auth);
    const before = await countTasks(served.ctx.db.sql);
    const result = await client.callTool({ name: 'tasks_create', arguments: { title: '', unknownField: 1 } });
    const problem = problemOf(result);
    expect(problem).toMatchObject({ status: 400, code: 'validation_failed' });
    expect(problem.errors?.map((issue) => issue.path)).toEqual(expect.arrayContaining(['body.title']));
    expect(await countTasks(served.ctx.db.sql)).toBe(before);
  });

  it('updates with If-Match and replays a create with the same idempotency key', async () => {
    const client = await connect(ada.auth);
    const args = { title: 'Once', idempotencyKey: 'agent-retry-1' };
    const first = TaskSchema.parse(
      (await client.callTool({ name: 'tasks_create', arguments: args })).structuredContent,
    );
    const again = TaskSchema.parse(
      (await client.callTool({ name: 'tasks_create', arguments: args })).structuredContent,
    );
    expect(again.id).toBe(first.id);
    const stale = await client.callTool({
      name: 'tasks_update',
      arguments: { task_id: first.id, ifMatch: '"99"', status: 'done' },
    });
    expect(problemOf(stale)).toMatchObject({ code: 'precondition_failed' });
    const updated = await client.callTool({
      name: 'tasks_update',
      arguments: { task_id: first.id, ifMatch: `"${first.version}"`, status: 'done' },
    });
    expect(TaskSchema.parse(updated.structuredContent).status).toBe('done');
    const removed = await client.callTool({ name: 'tasks_delete', arguments: { task_id: first.id } });
    expect(removed.isError).toBeFalsy();
    expect(removed.structuredContent).toBeUndefined();
  });

  it('a tool the token may not use is an error result, and the scope is enforced all the same', async () => {
    const pat = await createPersonalToken(served, ada, ['tasks:read']);
    const client = await connect(pat.auth);
    expect(problemOf(await client.callTool({ name: 'tasks_create', arguments: { title: 'no' } }))).toMatchObject({
      code: 'not_found',
    });
    expect(problemOf(await client.callTool({ name: 'tasks_list_everything', arguments: {} }))).toMatchObject({
      code: 'not_found',
    });
    const list = await client.callTool({ name: 'tasks_list', arguments: { limit: 5, status: ['todo', 'done'] } });
    expect(list.isError).toBeFalsy();
  });
});

describe('project tools', () => {
  it('create a project, add, change and remove a member, list and delete, through the REST handlers', async () => {
    const token = await createPersonalToken(served, ada, ['projects:write']);
    const client = await connect(token.auth);
    const created = await client.callTool({ name: 'projects_create', arguments: { name: 'By an agent' } });
    const project = ProjectSchema.parse(created.structuredContent);
    expect(project).toMatchObject({ name: 'By an agent', role: 'admin', memberCount: 1 });
    const project_id = project.id;
    const added = await client.callTool({
      name: 'project_members_add',
      arguments: { project_id, userId: grace.user.id, role: 'viewer' },
    });
    expect(MemberSchema.parse(added.structuredContent)).toMatchObject({ userId: grace.user.id, role: 'viewer' });
    // Authorization and conflicts as over REST: adding Grace again is 409 already_member.
    expect(
      problemOf(
        await client.callTool({
          name: 'project_members_add',
          arguments: { project_id, userId: grace.user.id, role: 'viewer' },
        }),
      ),
    ).toMatchObject({ status: 409, code: 'already_member' });
    const changed = await client.callTool({
      name: 'project_members_update',
      arguments: { project_id, user_id: grace.user.id, role: 'editor' },
    });
    expect(changed.structuredContent).toMatchObject({ userId: grace.user.id, role: 'editor' });
    const members = await client.callTool({ name: 'project_members_list', arguments: { project_id } });
    expect(members.structuredContent).toMatchObject({ items: [{ userId: ada.user.id }, { userId: grace.user.id }] });
    // The last admin stays, as over REST.
    expect(
      problemOf(
        await client.callTool({ name: 'project_members_delete', arguments: { project_id, user_id: ada.user.id } }),
      ),
    ).toMatchObject({ status: 409, code: 'last_project_admin' });
    const removed = await client.callTool({
      name: 'project_members_delete',
      arguments: { project_id, user_id: grace.user.id },
    });
    expect(removed).not.toHaveProperty('isError', true);
    const listed = await client.callTool({ name: 'projects_list', arguments: { q: 'agent' } });
    expect(listed.structuredContent).toMatchObject({ items: [{ id: project_id, memberCount: 1 }] });
    // A projects:read token sees the project; the tool to delete it is not one of its tools.
    const reader = await connect((await createPersonalToken(served, ada, ['projects:read'])).auth);
    expect(
      (await reader.callTool({ name: 'projects_get', arguments: { project_id } })).structuredContent,
    ).toMatchObject({ id: project_id });
    expect(problemOf(await reader.callTool({ name: 'projects_delete', arguments: { project_id } }))).toMatchObject({
      code: 'not_found',
    });
    expect(await client.callTool({ name: 'projects_delete', arguments: { project_id } })).not.toHaveProperty(
      'isError',
      true,
    );
    await served.http.get(`/projects/${project_id}`).set('Authorization', ada.auth).expect(404);
  });
});

describe('the MCP endpoint over plain HTTP', () => {
  const initialize = {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'curl', version: '1' } },
  };

  it('without a valid bearer token is a 401 problem with WWW-Authenticate: Bearer', async () => {
    const res = await served.http.post('/mcp').set('Accept', 'application/json, text/event-stream').send(initialize);
    expectProblem(res, 401, 'unauthenticated');
    expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
    const revoked = await served.http.post('/mcp').set('Authorization', 'Bearer tsk_pat_nope').send(initialize);
    expectProblem(revoked, 401, 'unauthenticated');
  });

  it('GET is 405 (stateless: no stream to open)', async () => {
    const res = await served.http.get('/mcp').set('Authorization', ada.auth);
    expectProblem(res, 405, 'method_not_allowed');
    expect(res.headers.allow).toBe('POST');
  });

  it('a request from an origin that is not allowed is 403', async () => {
    const res = await served.http
      .post('/mcp')
      .set('Authorization', ada.auth)
      .set('Origin', 'https://evil.example.test')
      .set('Accept', 'application/json, text/event-stream')
      .send(initialize);
    expectProblem(res, 403, 'forbidden');
    await served.http
      .post('/mcp')
      .set('Authorization', ada.auth)
      .set('Origin', 'https://app.example.test')
      .set('Accept', 'application/json, text/event-stream')
      .send(initialize)
      .expect(200);
  });
});

describe('MCP_ENABLED=false', () => {
  const off = serviceForFile({ MCP_ENABLED: 'false' });
  it('has no /mcp', async () => {
    const user = await registerUser(off);
    expectProblem(await off.http.post('/mcp').set('Authorization', user.auth).send({}), 404, 'not_found');
  });
});
