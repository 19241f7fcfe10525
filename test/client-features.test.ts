import net from 'node:net';
import { describe, expect, it } from 'vitest';
import {
  createClient,
  isProblem,
  memoryTokenStore,
  ok,
  ProblemError,
  type ClientOptions,
  type SessionTokens,
} from '../contract/index.js';
import { validateAnswers } from '../contract/validate.js';
import { listen, serviceForFile, startService } from './support/app.js';
import { expiredAccessToken } from './support/tokens.js';
import { uniqueEmail } from './support/users.js';
import { listenOnLoopback } from './support/loopback.js';

const PASSWORD = 'correct horse battery';

/** A client recording the requests it sends (method, path and query). */
function recordingClient(options: Partial<ClientOptions> = {}, fetchImpl: typeof fetch = fetch) {
  const calls: string[] = [];
  const client = createClient({
    baseUrl: served.baseUrl,
    validate: validateAnswers,
    ...options,
    fetch: (input, init) => {
      const url = new URL(String(input));
      calls.push(`${init?.method ?? 'GET'} ${url.pathname}${decodeURIComponent(url.search)}`);
      return fetchImpl(input, init);
    },
  });
  return { client, calls };
}
type TestClient = ReturnType<typeof recordingClient>['client'];

async function register(client: TestClient) {
  return (
    await ok(
      client.auth.register({ body: { email: uniqueEmail('features'), password: PASSWORD, name: 'Feature User' } }),
    )
  ).body;
}

const served = serviceForFile({}, { listen: true });

describe('list filters, pages and problems', () => {
  it('takes filters as arrays of their values and sends them as comma lists', async () => {
    const { client, calls } = recordingClient();
    await register(client);
    for (const status of ['todo', 'in_progress', 'done'] as const)
      await ok(client.tasks.create({ body: { title: `A ${status} task`, status } }));
    calls.length = 0;

    const listed = await ok(client.tasks.list({ query: { status: ['todo', 'done'], sort: 'title' } }));
    expect(listed.body.items.map((task) => task.status)).toEqual(['done', 'todo']);
    expect(calls).toEqual(['GET /tasks?sort=title&status=todo,done']);

    // @ts-expect-error: a status the contract does not know does not compile.
    const unknown = await client.tasks.list({ query: { status: ['open'] } });
    expect(unknown.status).toBe(400);
  });

  it("filters a user's tasks the same way", async () => {
    const { client } = recordingClient();
    const account = await register(client);
    await ok(client.tasks.create({ body: { title: 'Urgent', priority: 'urgent' } }));
    await ok(client.tasks.create({ body: { title: 'Low', priority: 'low' } }));
    const listed = await ok(
      client.users.listTasks({
        params: { user_id: account.user.id },
        query: { priority: ['urgent', 'high'], relation: 'owner' },
      }),
    );
    expect(listed.body.items.map((task) => task.title)).toEqual(['Urgent']);
  });

  it('iterates every page of a list, one request per page, and stops when the loop does', async () => {
    const { client, calls } = recordingClient();
    await register(client);
    for (let i = 1; i <= 5; i++) await ok(client.tasks.create({ body: { title: `Task ${i}` } }));
    calls.length = 0;

    const pages: string[][] = [];
    for await (const page of client.tasks.pages({ query: { limit: 2, sort: 'title' } }))
      pages.push(page.items.map((task) => task.title));
    expect(pages).toEqual([['Task 1', 'Task 2'], ['Task 3', 'Task 4'], ['Task 5']]);
    expect(calls).toHaveLength(3);
    expect(calls[1]).toMatch(/^GET \/tasks\?limit=2&sort=title&cursor=/);

    const titles: string[] = [];
    for await (const task of client.tasks.all({ query: { limit: 2, sort: '-title' } })) {
      titles.push(task.title);
      if (titles.length === 3) break;
    }
    expect(titles).toEqual(['Task 5', 'Task 4', 'Task 3']);
    expect(calls).toHaveLength(5); // two more pages, not three

    const tags: string[] = [];
    await ok(client.tags.create({ body: { name: 'one' } }));
    await ok(client.tags.create({ body: { name: 'two' } }));
    for await (const tag of client.tags.all({ query: { limit: 1 } })) tags.push(tag.name);
    expect(tags).toEqual(['one', 'two']);

    const projects: string[] = [];
    await ok(client.projects.create({ body: { name: 'first' } }));
    await ok(client.projects.create({ body: { name: 'second' } }));
    for await (const project of client.projects.all({ query: { limit: 1 } })) projects.push(project.name);
    expect(projects).toEqual(['first', 'second']);
  });

  it('a page that fails throws a typed ProblemError', async () => {
    const { client } = recordingClient();
    await register(client);
    const pages = client.users.pages(); // admin only
    const error = await pages.next().then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    expect(error).toBeInstanceOf(ProblemError);
    if (error instanceof ProblemError) expect(error.problem).toMatchObject({ status: 403, code: 'forbidden' });
  });

  it('isProblem narrows an error answer to problem details; ok() returns success and throws ProblemError', async () => {
    const { client } = recordingClient();
    await register(client);
    const missing = await client.tasks.get({ params: { task_id: '01900000-0000-7000-8000-000000000000' } });
    expect(isProblem(missing)).toBe(true);
    if (isProblem(missing)) expect(missing.body.code).toBe('not_found'); // typed: body is Problem

    const created = await ok(client.tasks.create({ body: { title: 'Exists' } }));
    expect(isProblem(created)).toBe(false);
    expect(created.status).toBe(201);

    const thrown = await ok(client.tasks.get({ params: { task_id: '01900000-0000-7000-8000-000000000000' } })).catch(
      (error: unknown) => error,
    );
    expect(thrown).toBeInstanceOf(ProblemError);
    if (thrown instanceof ProblemError) {
      expect(thrown.status).toBe(404);
      expect(thrown.problem.code).toBe('not_found');
      expect(thrown.headers.get('x-request-id')).toBe(thrown.problem.requestId);
    }
  });
});

/** A fetch that answers the first `times` requests matching `method` with `fail`, then passes through. */
function failingFirst(
  times: number,
  method: string,
  fail: () => Promise<Response>,
): { fetch: typeof fetch; failed: () => number } {
  let failed = 0;
  return {
    failed: () => failed,
    fetch: (input, init) => {
      if ((init?.method ?? 'GET') === method && failed < times) {
        failed++;
        return fail();
      }
      return fetch(input, init);
    },
  };
}
const networkError = () => Promise.reject(new TypeError('fetch failed'));
/** A 503 as a proxy in front of the service would send it. */
const unavailable = (retryAfter: string) => () =>
  Promise.resolve(
    new Response(
      JSON.stringify({
        type: '/problems/unavailable',
        title: 'Service unavailable',
        status: 503,
        code: 'unavailable',
        detail: 'Try again',
        instance: '/auth/me',
        requestId: 'proxy',
      }),
      { status: 503, headers: { 'content-type': 'application/problem+json', 'retry-after': retryAfter } },
    ),
  );

describe('retries, timeouts and cancellation', () => {
  it('retries a GET after network errors, with backoff', async () => {
    const flaky = failingFirst(2, 'GET', networkError);
    const { client, calls } = recordingClient({ retry: { retries: 2, baseDelayMs: 10 } }, flaky.fetch);
    await register(client);
    const me = await client.auth.me();
    expect(me.status).toBe(200);
    expect(flaky.failed()).toBe(2);
    expect(calls.filter((call) => call === 'GET /auth/me')).toHaveLength(3);
  });

  it('gives up after the configured retries, and never retries a POST without an Idempotency-Key', async () => {
    const flaky = failingFirst(10, 'GET', networkError);
    const { client, calls } = recordingClient({ retry: { retries: 1, baseDelayMs: 1 } }, flaky.fetch);
    await register(client);
    await expect(client.auth.me()).rejects.toThrow('fetch failed');
    expect(calls.filter((call) => call === 'GET /auth/me')).toHaveLength(2);

    const posts = failingFirst(1, 'POST', networkError);
    const { client: poster, calls: postCalls } = recordingClient(
      { retry: { retries: 3, baseDelayMs: 1 } },
      posts.fetch,
    );
    await expect(
      poster.auth.register({ body: { email: uniqueEmail('features'), password: PASSWORD, name: 'Once' } }),
    ).rejects.toThrow('fetch failed');
    expect(postCalls).toEqual(['POST /auth/register']);
  });

  it('retries a POST that carries an Idempotency-Key', async () => {
    const { client } = recordingClient();
    await register(client);
    const flaky = failingFirst(1, 'POST', networkError);
    const retrying = recordingClient({ tokens: client.tokens() ?? undefined, retry: { baseDelayMs: 1 } }, flaky.fetch);
    const created = await retrying.client.tasks.create({
      body: { title: 'Sent twice' },
      extraHeaders: { 'idempotency-key': crypto.randomUUID() },
    });
    expect(created.status).toBe(201);
    expect(retrying.calls).toEqual(['POST /tasks', 'POST /tasks']);
  });

  it('waits for Retry-After on 503, and returns the answer when Retry-After is longer than maxDelayMs', async () => {
    const brief = failingFirst(1, 'GET', unavailable('1'));
    const { client, calls } = recordingClient({ retry: { baseDelayMs: 1 } }, brief.fetch);
    await register(client);
    const started = Date.now();
    expect((await client.auth.me()).status).toBe(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
    expect(calls.filter((call) => call === 'GET /auth/me')).toHaveLength(2);

    const long = failingFirst(1, 'GET', unavailable('120'));
    const impatient = recordingClient(
      { tokens: client.tokens() ?? undefined, retry: { maxDelayMs: 1000 } },
      long.fetch,
    );
    expect((await impatient.client.auth.me()).status).toBe(503);
    expect(impatient.calls).toEqual(['GET /auth/me']);
  });

  it("honours the service's own 429 Retry-After (retries off: answered at once)", async () => {
    const limited = await startService({ RATE_LIMIT_PER_MINUTE: '2' });
    const limitedListening = await listen(limited);
    try {
      const client = createClient({ baseUrl: limitedListening.baseUrl, retry: { maxDelayMs: 100 } });
      // The health probes are never rate limited; the key set is, like every other operation.
      await client.service.jwks();
      await client.service.jwks();
      const started = Date.now();
      const limitedAnswer = await client.service.jwks();
      expect(limitedAnswer.status).toBe(429);
      expect(Number(limitedAnswer.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(Date.now() - started).toBeLessThan(1000); // Retry-After (tens of seconds) exceeds maxDelayMs
    } finally {
      await limitedListening.close();
      await limited.close();
    }
  });

  it('abandons a call after timeoutMs, and a call aborted by its own signal, without retrying', async () => {
    // A server that accepts connections and never answers.
    const sockets: net.Socket[] = [];
    const silent = net.createServer((socket) => void sockets.push(socket));
    const port = await listenOnLoopback(silent);
    let attempts = 0;
    const counting: typeof fetch = (input, init) => {
      attempts++;
      return fetch(input, init);
    };
    try {
      const client = createClient({ baseUrl: `http://127.0.0.1:${port}`, timeoutMs: 200, fetch: counting });
      const started = Date.now();
      await expect(client.service.healthz()).rejects.toMatchObject({ name: 'TimeoutError' });
      expect(Date.now() - started).toBeLessThan(2000);
      expect(attempts).toBe(1);

      const controller = new AbortController();
      const pending = client.service.healthz({ fetchOptions: { signal: controller.signal } });
      controller.abort();
      await expect(pending).rejects.toMatchObject({ name: 'AbortError' });
      expect(attempts).toBe(2);
    } finally {
      for (const socket of sockets) socket.destroy();
      silent.close();
    }
  });
});

describe('sharing a session', () => {
  async function expiredSession(): Promise<SessionTokens> {
    const { client } = recordingClient();
    await register(client);
    const tokens = client.tokens();
    if (!tokens) throw new Error('no tokens');
    return {
      accessToken: await expiredAccessToken(served, tokens.accessToken),
      refreshToken: tokens.refreshToken,
    };
  }

  it('clients sharing a token store refresh once and keep one session', async () => {
    const store = memoryTokenStore(await expiredSession());
    const tabs = [
      recordingClient({ tokenStore: store }),
      recordingClient({ tokenStore: store }),
      recordingClient({ tokenStore: store }),
    ];
    for (let round = 0; round < 3; round++) {
      const answers = await Promise.all(tabs.flatMap(({ client }) => [client.auth.me(), client.tasks.list()]));
      expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200, 200, 200, 200]);
      // Expire the shared access token again for the next round.
      const tokens = await store.get();
      if (!tokens) throw new Error('the session ended');
      await store.set({
        accessToken: await expiredAccessToken(served, tokens.accessToken),
        refreshToken: tokens.refreshToken,
      });
    }
    const refreshes = tabs.flatMap(({ calls }) => calls).filter((call) => call === 'POST /auth/refresh');
    expect(refreshes).toHaveLength(3); // one a round, for all three clients
  });

  it('a client re-reads the store before refreshing: a token another tab rotated is used, not refreshed again', async () => {
    // Two tabs over one saved session (as with localStorage): each is its own store object.
    let saved: SessionTokens | undefined = await expiredSession();
    const sharedStorage = () => ({ get: () => saved, set: (next: SessionTokens | undefined) => void (saved = next) });
    const first = recordingClient({ tokenStore: sharedStorage() });
    const second = recordingClient({ tokenStore: sharedStorage() });
    expect((await first.client.auth.me()).status).toBe(200);
    expect((await second.client.auth.me()).status).toBe(200);
    expect(first.calls).toEqual(['GET /auth/me', 'POST /auth/refresh', 'GET /auth/me']);
    // The second tab read the rotated tokens before its first call: no 401, no refresh.
    expect(second.calls).toEqual(['GET /auth/me']);

    // Both expired again: the second tab's 401 finds the store already renewed by the first.
    const tokens = saved;
    if (!tokens) throw new Error('the session ended');
    const stale = {
      accessToken: await expiredAccessToken(served, tokens.accessToken),
      refreshToken: tokens.refreshToken,
    };
    saved = stale;
    // The racing tab reads the stale tokens for its call; the first tab renews the session before
    // the racing tab's 401 comes back, so the re-read before refreshing finds the new tokens.
    let reads = 0;
    const racing = recordingClient({
      tokenStore: { get: () => (reads++ === 0 ? stale : saved), set: (next) => void (saved = next) },
    });
    expect((await first.client.auth.me()).status).toBe(200);
    expect((await racing.client.auth.me()).status).toBe(200);
    expect(racing.calls).toEqual(['GET /auth/me', 'GET /auth/me']);
  });
});
