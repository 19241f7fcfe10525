import { describe, expect, it } from 'vitest';
import { createClient, type Client, type SessionTokens } from '../contract/index.js';
import { validateAnswers } from '../contract/validate.js';
import { serviceForFile } from './support/app.js';
import { expiredAccessToken } from './support/tokens.js';
import { uniqueEmail } from './support/users.js';

const PASSWORD = 'correct horse battery';

/** A client as a user would make one, recording the paths it calls and every change of tokens. */
function userClient(baseUrl: string, tokens?: SessionTokens) {
  const calls: string[] = [];
  const tokenChanges: (SessionTokens | undefined)[] = [];
  const client = createClient({
    baseUrl,
    tokens,
    validate: validateAnswers,
    onTokens: (next) => tokenChanges.push(next),
    fetch: (input, init) => {
      calls.push(`${init?.method ?? 'GET'} ${new URL(String(input)).pathname}`);
      return fetch(input, init);
    },
  });
  return { client, calls, tokenChanges };
}

async function registered(client: Client, name = 'Client User') {
  const res = await client.auth.register({ body: { email: uniqueEmail('client'), password: PASSWORD, name } });
  if (res.status !== 201) throw new Error(`register answered ${res.status}`);
  return res.body;
}

// One listening service for the file: every test registers its own account.
const served = serviceForFile({}, { listen: true });

describe('typed client against a listening service', () => {
  it('registers, keeps the tokens and sends them', async () => {
    const { client, tokenChanges } = userClient(served.baseUrl);
    const account = await registered(client, 'Ada');
    expect(client.tokens()).toEqual({ accessToken: account.accessToken, refreshToken: account.refreshToken });
    expect(tokenChanges).toHaveLength(1);

    const me = await client.auth.me();
    expect(me.status).toBe(200);
    if (me.status === 200) expect(me.body).toMatchObject({ id: account.user.id, name: 'Ada', role: 'user' });
  });

  it('logs in to an existing account', async () => {
    const first = userClient(served.baseUrl);
    const account = await registered(first.client);
    const { client } = userClient(served.baseUrl);
    const res = await client.auth.login({ body: { email: account.user.email, password: PASSWORD } });
    expect(res.status).toBe(200);
    expect(client.tokens()?.accessToken).toBeDefined();
    expect((await client.auth.me()).status).toBe(200);
  });

  it('answers a wrong password with 401 invalid_credentials and no refresh attempt', async () => {
    const first = userClient(served.baseUrl);
    const account = await registered(first.client);
    const { client, calls } = userClient(served.baseUrl);
    const res = await client.auth.login({ body: { email: account.user.email, password: 'not the password' } });
    expect(res.status).toBe(401);
    if (res.status === 401) expect(res.body.code).toBe('invalid_credentials');
    expect(calls).toEqual(['POST /auth/login']);
    expect(client.tokens()).toBeUndefined();
  });

  it('creates, lists and patches tasks with typed results', async () => {
    const { client } = userClient(served.baseUrl);
    const account = await registered(client);

    const created = await client.tasks.create({ body: { title: '  Write the client  ', priority: 'high' } });
    expect(created.status).toBe(201);
    if (created.status !== 201) return;
    expect(created.body).toMatchObject({
      title: 'Write the client',
      priority: 'high',
      status: 'todo',
      ownerId: account.user.id,
      version: 1,
    });
    expect(created.headers.get('location')).toBe(`/tasks/${created.body.id}`);
    await client.tasks.create({ body: { title: 'Second task' } });

    const listed = await client.tasks.list({ query: { sort: 'title', limit: 1 } });
    expect(listed.status).toBe(200);
    if (listed.status !== 200) return;
    expect(listed.body.items.map((task) => task.title)).toEqual(['Second task']);
    expect(listed.body.nextCursor).not.toBeNull();
    const next = await client.tasks.list({
      query: { sort: 'title', limit: 1, cursor: listed.body.nextCursor ?? undefined },
    });
    expect(next.status === 200 && next.body.items.map((task) => task.title)).toEqual(['Write the client']);

    const patched = await client.tasks.update({
      params: { task_id: created.body.id },
      headers: { 'if-match': '"1"' },
      body: { status: 'done', description: 'typed all the way' },
    });
    expect(patched.status).toBe(200);
    if (patched.status !== 200) return;
    expect(patched.body).toMatchObject({ status: 'done', description: 'typed all the way', version: 2 });
    expect(patched.body.completedAt).not.toBeNull();

    const stale = await client.tasks.update({
      params: { task_id: created.body.id },
      headers: { 'if-match': '"1"' },
      body: { title: 'lost update' },
    });
    expect(stale.status).toBe(412);
    if (stale.status === 412) expect(stale.body.code).toBe('precondition_failed');
  });

  it('uploads an attachment as multipart and downloads its bytes', async () => {
    const { client } = userClient(served.baseUrl);
    await registered(client);
    const task = await client.tasks.create({ body: { title: 'With a file' } });
    if (task.status !== 201) throw new Error(`create answered ${task.status}`);

    const text = 'plain notes, line one\n';
    const uploaded = await client.attachments.upload({
      params: { task_id: task.body.id },
      body: { file: new File([text], 'notes.txt', { type: 'text/plain' }) },
    });
    expect(uploaded.status).toBe(201);
    if (uploaded.status !== 201) return;
    expect(uploaded.body).toMatchObject({ taskId: task.body.id, filename: 'notes.txt', size: Buffer.byteLength(text) });

    const listed = await client.attachments.listForTask({ params: { task_id: task.body.id } });
    expect(listed.status === 200 && listed.body.items.map((a) => a.id)).toEqual([uploaded.body.id]);

    const downloaded = await client.attachments.download({ params: { attach_id: uploaded.body.id } });
    expect(downloaded.status).toBe(200);
    if (downloaded.status !== 200) return;
    expect(downloaded.body).toBeInstanceOf(Blob);
    expect(await downloaded.body.text()).toBe(text);

    const partial = await client.attachments.download({
      params: { attach_id: uploaded.body.id },
      headers: { range: 'bytes=0-4' },
    });
    expect(partial.status).toBe(206);
    if (partial.status === 206) expect(await partial.body.text()).toBe('plain');
  });

  it('uploads a Blob without a name, and takes a FormData as it is', async () => {
    const { client } = userClient(served.baseUrl);
    await registered(client);
    const task = await client.tasks.create({ body: { title: 'Blobs' } });
    if (task.status !== 201) throw new Error(`create answered ${task.status}`);

    const fromBlob = await client.attachments.upload({
      params: { task_id: task.body.id },
      body: { file: new Blob(['raw bytes']) },
    });
    expect(fromBlob.status).toBe(201);
    if (fromBlob.status === 201) expect(fromBlob.body.size).toBe(9);

    const form = new FormData();
    form.append('file', new Blob(['{"a":1}'], { type: 'application/json' }), 'data.json');
    const fromForm = await client.attachments.upload({ params: { task_id: task.body.id }, body: form });
    expect(fromForm.status).toBe(201);
    if (fromForm.status !== 201) return;
    expect(fromForm.body.filename).toBe('data.json');
    // A JSON attachment still downloads as bytes, not parsed.
    const bytes = await client.attachments.download({ params: { attach_id: fromForm.body.id } });
    expect(bytes.status === 200 && (await bytes.body.text())).toBe('{"a":1}');
  });

  it('logs out: the tokens are dropped and the session no longer answers', async () => {
    const { client, tokenChanges } = userClient(served.baseUrl);
    const account = await registered(client);
    const res = await client.auth.logout();
    expect(res.status).toBe(204);
    expect(client.tokens()).toBeUndefined();
    expect(tokenChanges.at(-1)).toBeUndefined();

    expect((await client.auth.me()).status).toBe(401);
    // The old tokens are dead on the server too.
    const resumed = userClient(served.baseUrl, {
      accessToken: account.accessToken,
      refreshToken: account.refreshToken,
    });
    const me = await resumed.client.auth.me();
    expect(me.status).toBe(401);
    expect(resumed.calls).toEqual(['GET /auth/me', 'POST /auth/refresh']);
    expect(resumed.client.tokens()).toBeUndefined();
  });
});

describe('typed client when the access token expires', () => {
  /** Hands the client a correctly signed but expired access token for its own session. */
  async function expire(client: Client): Promise<SessionTokens> {
    const tokens = client.tokens();
    if (!tokens) throw new Error('no tokens to expire');
    client.useTokens({
      accessToken: await expiredAccessToken(served, tokens.accessToken),
      refreshToken: tokens.refreshToken,
    });
    return tokens;
  }

  it('refreshes transparently and retries once', async () => {
    const { client, calls, tokenChanges } = userClient(served.baseUrl);
    await registered(client);
    const created = await client.tasks.create({ body: { title: 'Before expiry' } });
    expect(created.status).toBe(201);

    const before = await expire(client);
    calls.length = 0;
    tokenChanges.length = 0;
    const listed = await client.tasks.list();
    expect(listed.status).toBe(200);
    if (listed.status === 200) expect(listed.body.items.map((task) => task.title)).toEqual(['Before expiry']);
    expect(calls).toEqual(['GET /tasks', 'POST /auth/refresh', 'GET /tasks']);
    expect(tokenChanges).toEqual([client.tokens()]);
    expect(client.tokens()?.refreshToken).not.toBe(before.refreshToken);
  });

  it('shares one refresh among concurrent calls', async () => {
    const { client, calls, tokenChanges } = userClient(served.baseUrl);
    await registered(client);
    await expire(client);
    calls.length = 0;
    tokenChanges.length = 0;
    // Were each call to refresh on its own, the second use of the rotated refresh token would be
    // reuse and revoke the session: every call succeeding shows they shared one.
    const answers = await Promise.all([client.auth.me(), client.tasks.list(), client.tags.list(), client.auth.me()]);
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200, 200]);
    expect(calls.filter((call) => call === 'POST /auth/refresh')).toHaveLength(1);
    expect(tokenChanges).toHaveLength(1);
  });

  it('surfaces the 401 when the refresh fails', async () => {
    const { client, calls, tokenChanges } = userClient(served.baseUrl);
    await registered(client);
    // Another holder of the same session logs it out, and the access token has expired too.
    const tokens = await expire(client);
    const other = userClient(served.baseUrl, tokens);
    expect((await other.client.auth.logout()).status).toBe(204);
    calls.length = 0;

    const me = await client.auth.me();
    expect(me.status).toBe(401);
    if (me.status === 401) expect(me.body.code).toBe('unauthenticated');
    expect(calls).toEqual(['GET /auth/me', 'POST /auth/refresh']);
    expect(client.tokens()).toBeUndefined();
    expect(tokenChanges.at(-1)).toBeUndefined();
  });
});
