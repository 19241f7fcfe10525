// Contract fuzzing: requests generated from the contract's own zod schemas, valid and
// mutated, against every operation. Invariants: no 5xx; every error is problem+json with a
// documented code; a refused request changes nothing; every success matches the contract.
// FUZZ_RUNS sets the cases per operation (npm run test:stress runs many more).
import { isAppRoute, type AppRoute, type AppRouter } from '@ts-rest/core';
import fc from 'fast-check';
import { sql } from 'kysely';
import http from 'node:http';
import request, { type Response } from 'supertest';
import type TestAgent from 'supertest/lib/agent.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ZodFastCheck } from 'zod-fast-check';
import { contract } from '../contract/index.js';
import { IdSchema, ProblemSchema, TimestampInputSchema } from '../contract/common.js';
import { WebhookUrlSchema } from '../contract/webhooks.js';
import { contractTools } from '../server/mcp/tools.js';
import { rawQuery, tables } from '../server/db/query.js';
import { countOwned } from './support/rows.js';
import { useWebhookNetwork } from '../server/webhooks/network.js';
import { serviceForFile } from './support/app.js';
import { createTask } from './support/tasks.js';
import { registerUser, type TestUser, userForFile } from './support/users.js';
import { stubNetwork } from './support/webhook-network.js';

const RUNS = Number(process.env.FUZZ_RUNS ?? 20);

function routesOf(router: AppRouter, prefix = ''): [string, AppRoute][] {
  return Object.entries(router).flatMap(([name, entry]) =>
    isAppRoute(entry) ? [[`${prefix}${name}`, entry] as [string, AppRoute]] : routesOf(entry, `${prefix}${name}.`),
  );
}
// GET /events answers a stream that stays open: its answer is judged by its status and headers, and
// a 200 is then hung up on (sendStream).
const STREAMS = new Set(['events.stream']);
const ROUTES = routesOf(contract);

const service = serviceForFile({}, { listen: true });
/** Through a real socket, so that what Node's own parser refuses is answered as the service answers it. */
let agent: TestAgent;
let alice: TestUser;
const bob = userForFile(service);
const admin = userForFile(service, { admin: true });
/** Ids the generated paths pick from: the caller's own objects, another user's, and unknown ones. */
let ids: string[] = [];

async function refreshFixture(): Promise<void> {
  // A generated request may have logged alice out or deleted her: she comes back as someone new.
  if ((await service.http.get('/auth/me').set('Authorization', alice.auth)).status !== 200)
    alice = await registerUser(service);
  const db = service.ctx.db.sql;
  if ((await countOwned(db, 'tasks', alice.user.id)) === 0) await createTask(service, alice, { title: 'fixture' });
  if ((await countOwned(db, 'tags', alice.user.id)) === 0) {
    await service.http
      .post('/tags')
      .set('Authorization', alice.auth)
      .send({ name: `fixture ${Date.now()}` });
  }
  if ((await countOwned(db, 'webhooks', alice.user.id)) === 0) {
    await service.http
      .post('/webhooks')
      .set('Authorization', alice.auth)
      .send({ url: 'https://public.example/hook', events: ['*'] })
      .expect(201);
    await createTask(service, alice, { title: 'a delivery for the fixture' }); // its delivery row is written with the event
  }
  const newest = (
    table: 'tasks' | 'tags' | 'attachments' | 'users' | 'webhooks' | 'webhook_deliveries',
    take: number,
  ) => db.all(tables.selectFrom(table).select('id').orderBy('id', 'desc').limit(take));
  const [tasks, tags, attachments, users, webhooks, deliveries] = await Promise.all([
    newest('tasks', 5),
    newest('tags', 3),
    newest('attachments', 3),
    newest('users', 3),
    newest('webhooks', 3),
    newest('webhook_deliveries', 3),
  ]);
  ids = [
    alice.user.id,
    bob.user.id,
    ...[...tasks, ...tags, ...attachments, ...users, ...webhooks, ...deliveries].map((row) => row.id),
  ];
}

/** Everything any request could change, as one digest: a refused request must leave it as it was. */
async function stateDigest(): Promise<string> {
  const row = await service.ctx.db.sql.first(
    rawQuery(sql<{ digest: string | null }>`
    SELECT md5(string_agg(x, '|' ORDER BY x)) AS digest FROM (
      SELECT 't' || id || version || title || description || status || priority || coalesce(assignee_id::text, '') FROM tasks
      UNION ALL SELECT 'g' || id || name || color FROM tags
      UNION ALL SELECT 'l' || task_id || tag_id FROM task_tags
      UNION ALL SELECT 'a' || id || filename FROM attachments
      UNION ALL SELECT 'u' || id || email || name || role || password_hash FROM users
      UNION ALL SELECT 's' || id || refresh_token_hash || coalesce(revoked_at::text, '') FROM sessions
      UNION ALL SELECT 'w' || id || url || array_to_string(events, ',') || description || active::text || secret FROM webhooks
      UNION ALL SELECT 'd' || id || attempt || state || coalesce(next_attempt_at::text, '') FROM webhook_deliveries) AS s(x)`),
  );
  return row?.digest ?? '';
}

// Strings that broke or nearly broke services before: NUL, lone surrogates, overlong, RTL, BOM, escapes.
const edgeString = fc.constantFrom(
  '',
  ' ',
  '\u0000',
  'a\ud800',
  '\udc00',
  '\u202e\u0041',
  '\ufeff',
  '𝕏'.repeat(300),
  'x'.repeat(20_000),
  '%00',
  '%E0%A4%A',
  '../../etc/passwd',
  "' OR 1=1 --",
  '<script>alert(1)</script>',
  '+ADw-script+AD4-',
  '\r\nX-Injected: 1',
  '🏳️‍🌈',
  'é'.normalize('NFD'),
  '-1',
  '1e309',
  'null',
  '[]',
);
const weirdValue: fc.Arbitrary<unknown> = fc.oneof(
  edgeString,
  fc.constantFrom(null, true, -1, 0, 1.5, 2 ** 53, -(2 ** 63), Number.MAX_VALUE, [], {}, [null], { $ne: null }),
  fc.string(),
  fc.fullUnicodeString({ maxLength: 50 }),
  fc.integer(),
  fc.double(),
  fc.array(fc.string(), { maxLength: 60 }),
  fc.anything({ maxDepth: 4 }),
  // Arrays far past any maximum (the bound is checked before the items), device tokens.
  fc.integer({ min: 51, max: 20_000 }).map((n) => Array.from({ length: n }, (_, i) => (i % 2 ? 'x' : { bad: i }))),
  fc.constantFrom('x'.repeat(600), `${'a'.repeat(43)}.${'b'.repeat(22)}`),
);
const deepJson = fc.integer({ min: 100, max: 20_000 }).map((depth) => `${'['.repeat(depth)}${']'.repeat(depth)}`);

// Ids from the live fixture (so valid requests reach real objects), timestamps a database can hold.
const generator = ZodFastCheck()
  .override(
    IdSchema,
    fc.nat().map((n) => ids[n % ids.length] ?? ''),
  )
  .override(
    TimestampInputSchema,
    fc
      .date({ min: new Date('2000-01-01'), max: new Date('2100-01-01'), noInvalidDate: true })
      .map((d) => d.toISOString()),
  )
  // Webhook targets: public names, names that resolve privately, and refused address spellings.
  .override(
    WebhookUrlSchema,
    fc.oneof(
      fc.webUrl({ validSchemes: ['http', 'https'] }),
      fc.constantFrom(
        'https://public.example/hook',
        'http://private1.example/',
        'http://0x7f.1/',
        'http://[::ffff:10.0.0.1]/',
        'http://[64:ff9b::a9fe:a9fe]/',
        'http://198.51.100.7/',
        'http://[2001:db8::1]:8080/',
      ),
    ),
  );
/** Whether zod-fast-check can derive values for the schema (it cannot for some transforms and regexes). */
function derivable(schema: z.ZodTypeAny): boolean {
  try {
    fc.sample(generator.inputOf(schema), 30);
    return true;
  } catch {
    return false;
  }
}
function validInput(schema: unknown): fc.Arbitrary<unknown> {
  if (!(schema instanceof z.ZodType)) return fc.constant(undefined);
  if (derivable(schema)) return generator.inputOf(schema);
  // Field by field, with a plain string where a field's values cannot be derived (a comma list, a colour).
  const object = schema instanceof z.ZodEffects ? schema.innerType() : schema;
  if (!(object instanceof z.ZodObject)) return fc.string();
  const shape = object.shape as Record<string, z.ZodTypeAny>;
  const fields = Object.fromEntries(
    Object.entries(shape).map(([key, field]) => [
      key,
      derivable(field) ? generator.inputOf(field) : fc.string({ maxLength: 20 }),
    ]),
  );
  return fc.record(fields, { requiredKeys: Object.keys(shape).filter((key) => !shape[key]?.isOptional()) });
}

/** A valid input, or one mutated the way clients get it wrong and attackers do it on purpose. */
function mutated(schema: unknown): fc.Arbitrary<unknown> {
  const valid = validInput(schema);
  const mutation = fc
    .tuple(valid, fc.nat(), fc.string({ minLength: 1, maxLength: 12 }), weirdValue)
    .map(([value, n, key, weird]) => {
      if (value === null || typeof value !== 'object' || Array.isArray(value)) return weird;
      const entries = Object.entries(value);
      const copy: Record<string, unknown> = { ...value };
      const target = entries[n % Math.max(entries.length, 1)]?.[0];
      switch (n % 4) {
        case 0: // a field missing
          if (target) delete copy[target];
          return copy;
        case 1: // a field of the wrong type or value
          if (target) copy[target] = weird;
          return copy;
        case 2: // an extra field, server-owned or unknown
          copy[n % 8 === 2 ? 'id' : key] = weird;
          return copy;
        default:
          return weird;
      }
    });
  return fc.oneof({ weight: 2, arbitrary: valid }, { weight: 3, arbitrary: mutation });
}

const asQueryValue = (value: unknown): string =>
  Array.isArray(value)
    ? value.map(String).join(',')
    : typeof value === 'object' && value !== null
      ? JSON.stringify(value)
      : String(value);

interface Case {
  caller: 'alice' | 'bob' | 'admin' | 'none' | 'forged';
  params: number[];
  garbageParam: string | undefined;
  query: unknown;
  body: unknown;
  rawBody: string | undefined;
  contentType: string | undefined;
  headers: Record<string, string>;
}

function hostileCase(route: AppRoute): fc.Arbitrary<Case> {
  const body = 'body' in route ? route.body : undefined;
  return fc.record({
    caller: fc.constantFrom('alice', 'alice', 'alice', 'bob', 'admin', 'none', 'forged'),
    params: fc.array(fc.nat(), { minLength: 3, maxLength: 3 }),
    garbageParam: fc.option(
      fc.oneof(edgeString, fc.uuid(), fc.string()).filter((s) => s.length > 0 && s.length < 5000),
      { freq: 4 },
    ),
    query: route.query
      ? mutated(route.query)
      : fc.option(fc.dictionary(fc.string({ maxLength: 10 }), fc.string({ maxLength: 20 })), { freq: 4 }),
    body: mutated(body),
    rawBody: fc.option(
      fc.oneof(deepJson, fc.string(), fc.constantFrom('{"title":', '{', '"\\ud800"', 'null', '{"a":1}{"b":2}')),
      { freq: 5 },
    ),
    contentType: fc.constantFrom(
      'application/json',
      'application/json',
      'application/json',
      'application/merge-patch+json',
      'application/json; charset=utf-7',
      'application/json; charset=utf-16le',
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      undefined,
    ),
    headers: fc.dictionary(
      fc.constantFrom(
        'if-match',
        'if-none-match',
        'range',
        'if-range',
        'x-request-id',
        'accept',
        'x-forwarded-for',
        'origin',
        'idempotency-key',
        'last-event-id',
      ),
      fc.oneof(
        fc.string({ maxLength: 300 }),
        fc.constantFrom('*', 'W/"1"', '"1"', 'bytes=0-0', 'bytes=-5', 'bytes=9-1', 'bytes=0-1,2-3', 'x'.repeat(5000)),
      ),
      { maxKeys: 3 },
    ),
  });
}

const mediaTypeOf = (route: AppRoute): string =>
  'contentType' in route && route.contentType === 'multipart/form-data'
    ? 'multipart/form-data'
    : route.method === 'PATCH'
      ? 'application/merge-patch+json'
      : 'application/json';

/** A request a correct client would send: the contract's valid inputs, the right media type, real ids. */
function cleanCase(route: AppRoute): fc.Arbitrary<Case> {
  const body = 'body' in route ? route.body : undefined;
  return fc.record({
    caller: fc.constantFrom('alice', 'alice', 'admin'),
    params: fc.array(fc.nat(), { minLength: 3, maxLength: 3 }),
    garbageParam: fc.constant(undefined),
    query: route.query ? validInput(route.query) : fc.constant(undefined),
    body: validInput(body),
    rawBody: fc.constant(undefined),
    contentType: fc.constant(mediaTypeOf(route)),
    headers: fc.constant({}),
  });
}

const caseFor = (route: AppRoute): fc.Arbitrary<Case> =>
  fc.oneof({ weight: 2, arbitrary: cleanCase(route) }, { weight: 3, arbitrary: hostileCase(route) });

/** A path segment for any string: a lone surrogate goes as the bytes a client would send for it. */
function pathSegment(value: string): string {
  try {
    return encodeURIComponent(value);
  } catch {
    return encodeURIComponent(value.replace(/[\ud800-\udfff]/g, '')) + '%ED%A0%80';
  }
}

function pathFor(route: AppRoute, c: Case): string {
  let i = 0;
  return route.path.replace(/:(\w+)/g, () => {
    const pick = c.params[i++] ?? 0;
    // Mostly a real id; sometimes garbage, which must be a 400 and never reach the database as such.
    const value = i === 1 && c.garbageParam !== undefined ? c.garbageParam : (ids[pick % ids.length] ?? '');
    return pathSegment(value);
  });
}

function authorizationFor(caller: Case['caller']): string | undefined {
  switch (caller) {
    case 'alice':
      return alice.auth;
    case 'bob':
      return bob.auth;
    case 'admin':
      return admin.auth;
    case 'forged':
      return `Bearer ${alice.accessToken.slice(0, -4)}AAAA`;
    case 'none':
      return undefined;
  }
}

async function send(route: AppRoute, c: Case): Promise<Response> {
  const query =
    c.query && typeof c.query === 'object'
      ? Object.entries(c.query).map(([k, v]) => `${pathSegment(k)}=${pathSegment(asQueryValue(v))}`)
      : [];
  const url = `${pathFor(route, c)}${query.length ? `?${query.join('&')}` : ''}`;
  const method = route.method.toLowerCase() as 'get' | 'post' | 'put' | 'patch' | 'delete';
  let req = agent[method](url);
  for (const [name, value] of Object.entries(c.headers)) {
    // Node refuses header values it cannot send (control characters): such a request never leaves.
    if (/^[\t\x20-\x7e\x80-\xff]*$/.test(value)) req = req.set(name, value);
  }
  const authorization = authorizationFor(c.caller);
  if (authorization) req = req.set('Authorization', authorization);
  if (route.method === 'GET') return req;
  if ('contentType' in route && route.contentType === 'multipart/form-data' && c.contentType?.startsWith('multipart')) {
    const name = typeof c.garbageParam === 'string' ? c.garbageParam.slice(0, 200) || 'file.bin' : 'file.bin';
    return req.attach('file', Buffer.from(JSON.stringify(c.body ?? null)), {
      filename: name,
      contentType: 'application/octet-stream',
    });
  }
  if (c.contentType) req = req.set('Content-Type', c.contentType);
  const text = c.rawBody ?? JSON.stringify(c.body) ?? '';
  return text === '' ? req : req.send(c.contentType?.includes('utf-16') ? Buffer.from(text, 'utf16le') : text);
}

/** What checkAnswer reads of an answer. */
interface Answer {
  status: number;
  text: string;
  body: unknown;
  headers: Record<string, string | string[] | undefined>;
}

/** A stream's request: the answer of a refusal whole; a 200's status and headers, then hung up on. */
function sendStream(route: AppRoute, c: Case): Promise<Answer> {
  const query =
    c.query && typeof c.query === 'object'
      ? Object.entries(c.query).map(([k, v]) => `${pathSegment(k)}=${pathSegment(asQueryValue(v))}`)
      : [];
  const headers: Record<string, string> = Object.fromEntries(
    Object.entries(c.headers).filter(([, value]) => /^[\t\x20-\x7e]*$/.test(value)),
  );
  const authorization = authorizationFor(c.caller);
  if (authorization) headers.authorization = authorization;
  return new Promise((resolve, reject) => {
    const req = http.get(
      `${service.baseUrl}${pathFor(route, c)}${query.length ? `?${query.join('&')}` : ''}`,
      { headers },
      (res) => {
        const answer = { status: res.statusCode ?? 0, headers: res.headers };
        if (answer.status === 200) {
          req.destroy();
          return resolve({ ...answer, text: '', body: {} });
        }
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({
            ...answer,
            text,
            body: /json/.test(String(res.headers['content-type'])) ? (JSON.parse(text) as unknown) : {},
          });
        });
      },
    );
    req.on('error', reject);
  });
}

const outcomes = new Map<number, number>();
let cases = 0;

function checkAnswer(route: AppRoute, res: Answer): void {
  expect(res.status, (res.text ?? '').slice(0, 500)).toBeLessThan(500);
  if (res.status >= 400) {
    // An error answer stays small whatever the input.
    expect(Buffer.byteLength(res.text ?? '')).toBeLessThanOrEqual(16 * 1024);
    expect(((res.body as { errors?: unknown[] }).errors ?? []).length).toBeLessThanOrEqual(20);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    const problem = ProblemSchema.strict().parse(res.body);
    expect(problem.status).toBe(res.status);
    return;
  }
  const schema: unknown = route.responses[res.status];
  expect(schema, `status ${res.status} is not in the contract`).toBeDefined();
  if (schema instanceof z.ZodType && /json/.test(String(res.headers['content-type'] ?? ''))) {
    const parsed = schema.safeParse(res.body);
    expect(parsed.success, JSON.stringify(parsed.error?.issues ?? []).slice(0, 500)).toBe(true);
  }
}

beforeAll(async () => {
  // Webhook targets resolve here, never through DNS: a name with a digit in it resolves to a private
  // address (refused), any other to a public one. No delivery worker runs, so nothing connects.
  const network = stubNetwork(() => {
    throw new Error('the fuzzer never delivers');
  });
  useWebhookNetwork(service.ctx, {
    ...network,
    resolve: async (hostname) => [{ address: /\d/.test(hostname) ? '10.0.0.1' : '93.184.215.14', family: 4 }],
  });
  agent = request(service.baseUrl);
  alice = await registerUser(service);
  const task = await createTask(service, alice, { title: 'with a file' });
  await service.http
    .post(`/tasks/${task.id}/attachments`)
    .set('Authorization', alice.auth)
    .attach('file', Buffer.from('hello'), { filename: 'hello.txt' })
    .expect(201);
  await createTask(service, bob, { title: "bob's" });
  await refreshFixture();
}, 60_000);
afterAll(async () => {
  console.log(
    `contract fuzzing: ${cases} cases over ${ROUTES.length} operations; answers by status: ${JSON.stringify(Object.fromEntries([...outcomes].sort()))}`,
  );
});

describe('contract fuzzing', () => {
  it('covers every operation of the contract, the live stream included', () => {
    expect(ROUTES.length).toBeGreaterThan(30);
    expect(ROUTES.map(([name]) => name)).toContain('events.stream');
  });

  // The MCP endpoint is an adapter over the same operations (server/mcp): JSON-RPC messages, well
  // formed or not, with the contract's tool names and others, and arguments of any shape.
  it('POST /mcp (JSON-RPC over the contract)', async () => {
    const tools = [...contractTools().keys()];
    const message = fc.record(
      {
        jsonrpc: fc.constantFrom('2.0', '2.0', '2.0', '1.0', 2),
        id: fc.oneof(fc.integer(), fc.string({ maxLength: 40 }), fc.constant(null)),
        method: fc.oneof(
          fc.constantFrom(
            'initialize',
            'tools/list',
            'tools/call',
            'tools/call',
            'tools/call',
            'ping',
            'resources/list',
            'notifications/initialized',
          ),
          fc.string({ maxLength: 40 }),
        ),
        params: fc.oneof(
          fc.record({
            name: fc.oneof(fc.constantFrom(...tools), fc.string({ maxLength: 60 })),
            arguments: fc.oneof(
              fc.dictionary(fc.string({ maxLength: 20 }), fc.jsonValue({ maxDepth: 3 })),
              fc.jsonValue({ maxDepth: 2 }),
            ),
          }),
          fc.jsonValue({ maxDepth: 3 }),
        ),
      },
      { requiredKeys: ['jsonrpc', 'method'] },
    );
    const body = fc.oneof(
      { weight: 5, arbitrary: message.map((m) => JSON.stringify(m)) },
      fc.array(message, { maxLength: 4 }).map((m) => JSON.stringify(m)),
      fc.string({ maxLength: 200 }),
    );
    await fc.assert(
      fc.asyncProperty(
        body,
        fc.constantFrom<Case['caller']>('alice', 'alice', 'none', 'forged'),
        fc.constantFrom('application/json, text/event-stream', 'application/json', '*/*'),
        async (text, caller, accept) => {
          let req = agent.post('/mcp').set('Accept', accept).set('Content-Type', 'application/json');
          const authorization = authorizationFor(caller);
          if (authorization) req = req.set('Authorization', authorization);
          const res = await req.send(text);
          cases++;
          outcomes.set(res.status, (outcomes.get(res.status) ?? 0) + 1);
          expect(res.status, (res.text ?? '').slice(0, 500)).toBeLessThan(500);
          if (res.status >= 400) expect(Buffer.byteLength(res.text ?? '')).toBeLessThanOrEqual(16 * 1024);
          if (res.status === 200 && caller === 'alice') await refreshFixture();
        },
      ),
      { numRuns: RUNS },
    );
  }, 300_000);

  for (const [name, route] of ROUTES) {
    it(`${route.method} ${route.path} (${name})`, async () => {
      await fc.assert(
        fc.asyncProperty(caseFor(route), async (c) => {
          const before = await stateDigest();
          const res = STREAMS.has(name) ? await sendStream(route, c) : await send(route, c);
          cases++;
          outcomes.set(res.status, (outcomes.get(res.status) ?? 0) + 1);
          checkAnswer(route, res);
          if (res.status >= 400) expect(await stateDigest(), `${res.status} ${res.text.slice(0, 200)}`).toBe(before);
          else if (route.method !== 'GET') await refreshFixture();
        }),
        { numRuns: RUNS },
      );
    }, 300_000);
  }
});
