import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { isAppRoute, isAppRouteNoBody, type AppRoute, type AppRouter } from '@ts-rest/core';
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { contract, isPublicRoute } from '../contract/index.js';
import { isCreatingPost } from '../server/http/idempotency.js';
import { useWebhookNetwork } from '../server/webhooks/network.js';
import { listen, serviceForFile } from './support/app.js';
import { bash, CURL_STATUS_PRELUDE } from './support/shell.js';
import { makeAdmin } from './support/rows.js';
import { registerUser, uniqueEmail } from './support/users.js';
import { stubNetwork } from './support/webhook-network.js';

const ROOT = path.resolve(import.meta.dirname, '..');

const SampleSchema = z.object({ lang: z.string(), label: z.string(), source: z.string() });
const OperationSchema = z
  .object({ operationId: z.string(), description: z.string(), 'x-codeSamples': z.array(SampleSchema) })
  .passthrough();

/** Every operation of the contract, by its client path (`tasks.create`). */
function routes(router: AppRouter, prefix = ''): [string, AppRoute][] {
  return Object.entries(router).flatMap(([key, entry]) =>
    isAppRoute(entry) ? [[`${prefix}${key}`, entry] as [string, AppRoute]] : routes(entry, `${prefix}${key}.`),
  );
}

/** Splits a POSIX command line (single quotes, double quotes, backslash-newline) into its words. */
function words(line: string): string[] {
  const found: string[] = [];
  const pattern = /'([^']*)'|"((?:[^"\\]|\\.)*)"|\\\n|(\S+)/g;
  let current: string | undefined;
  let last = 0;
  for (const match of line.matchAll(pattern)) {
    const index = match.index ?? 0;
    const joined = index === last && current !== undefined && match[0] !== '\\\n';
    if (match[0] === '\\\n') {
      if (current !== undefined) found.push(current);
      current = undefined;
    } else {
      const piece = match[1] ?? match[2] ?? match[3] ?? '';
      if (joined) current = (current ?? '') + piece;
      else {
        if (current !== undefined) found.push(current);
        current = piece;
      }
    }
    last = index + match[0].length;
  }
  if (current !== undefined) found.push(current);
  return found;
}

interface CurlRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string;
  file?: string;
}

/** What a generated curl command line asks for (the options the generator uses, and no others). */
function parseCurl(command: string): CurlRequest {
  const [program, ...rest] = words(command);
  expect(program).toBe('curl');
  const request: CurlRequest = { method: 'GET', url: '', headers: {} };
  for (let i = 0; i < rest.length; i++) {
    const word = rest[i] ?? '';
    const value = () => rest[++i] ?? '';
    if (word === '-X') request.method = value();
    else if (word === '-H') {
      const [name = '', ...parts] = value().split(':');
      request.headers[name.toLowerCase()] = parts.join(':').trim();
    } else if (word === '-d') request.body = value();
    else if (word === '-F') request.file = value();
    else if (word.startsWith('http')) request.url = word;
    else throw new Error(`unexpected word ${word} in ${command}`);
  }
  return request;
}

const service = serviceForFile();
let operations: Map<string, z.infer<typeof OperationSchema>>;
beforeAll(async () => {
  const document = z
    .object({ paths: z.record(z.record(z.unknown())) })
    .parse((await service.http.get('/openapi.json').expect(200)).body);
  operations = new Map(
    Object.values(document.paths)
      .flatMap((methods) => Object.values(methods))
      .map((operation) => OperationSchema.parse(operation))
      .map((operation) => [operation.operationId, operation]),
  );
});

const sampleOf = (operationId: string, label: string): string => {
  const sample = operations.get(operationId)?.['x-codeSamples'].find((s) => s.label === label);
  if (!sample) throw new Error(`${operationId} has no ${label} example`);
  return sample.source;
};

describe('the examples on /docs', () => {
  it('show every operation with a curl command and a typed-client call, in its description too', () => {
    for (const [name] of routes(contract)) {
      const operation = operations.get(name);
      expect(operation, name).toBeDefined();
      expect(
        operation?.['x-codeSamples'].map((sample) => sample.label),
        name,
      ).toEqual(['curl', 'Typed client']);
      expect(operation?.description, name).toContain('```sh\ncurl');
      expect(operation?.description, name).toContain(`await client.${name}(`);
    }
  });

  it("name the operation's method and path, and send bodies its schema takes", () => {
    for (const [name, route] of routes(contract)) {
      const request = parseCurl(sampleOf(name, 'curl'));
      expect(request.method, name).toBe(route.method);
      // supertest reached the service at 127.0.0.1:<port>: the samples say so, not localhost:3000.
      const pattern = new RegExp(`^http://127\\.0\\.0\\.1:\\d+${route.path.replace(/:\w+/g, '[^/]+')}$`);
      expect(request.url, name).toMatch(pattern);
      if (
        'body' in route &&
        route.body instanceof z.ZodType &&
        !isAppRouteNoBody(route.body) &&
        request.body !== undefined
      ) {
        // An id the reader made earlier, read from the shell ($OTHER_TASK_ID), stands for any id.
        const body = request.body.replace(/\$[A-Z_]+/g, '0193a5c2-0000-7000-8000-000000000000');
        const parsed = route.body.safeParse(JSON.parse(body));
        expect(parsed.success, `${name}: ${request.body}`).toBe(true);
      }
    }
  });

  it(
    'run as they are, in order, with the ids of what they created: every create succeeds, none is refused as malformed',
    { timeout: 180_000 },
    async () => {
      // Webhook targets resolve here, never through DNS; no delivery worker runs, so nothing connects.
      useWebhookNetwork(service.ctx, {
        ...stubNetwork(() => {
          throw new Error('no delivery runs here');
        }),
        resolve: async () => [{ address: '93.184.215.14', family: 4 }],
      });
      const server = await listen(service);
      const work = await mkdtemp(path.join(tmpdir(), 'task-service-code-samples-'));
      try {
        await writeFile(path.join(work, 'report.pdf'), '%PDF-1.4 the bytes of a report');
        // The page as a reader's browser gets it: samples name the URL it reached.
        const served = await fetch(`${server.baseUrl}/openapi.json`);
        const samples = new Map(
          Object.values(
            z.object({ paths: z.record(z.record(OperationSchema.or(z.unknown()))) }).parse(await served.json()).paths,
          )
            .flatMap((methods) => Object.values(methods))
            .flatMap((operation) => {
              const parsed = OperationSchema.safeParse(operation);
              return parsed.success ? [parsed.data] : [];
            })
            .map((operation) => [
              operation.operationId,
              operation['x-codeSamples'].find((s) => s.label === 'curl')?.source ?? '',
            ]),
        );
        const admin = await registerUser(service, {
          email: uniqueEmail('admin'),
          password: 'correct horse battery staple',
        });
        await makeAdmin(service.ctx.db.sql, admin.user.id);
        const variables: Record<string, string> = { TOKEN: admin.accessToken, USER_ID: admin.user.id };
        const answers: string[] = [];
        const runSample = async (name: string) => {
          const sample = samples.get(name) ?? '';
          expect(sample, name).toMatch(new RegExp(`^curl( -X [A-Z]+)? "${server.baseUrl.replace(/\./g, '\\.')}/`));
          const assignments = Object.entries(variables)
            .map(([key, value]) => `${key}='${value}'`)
            .join('\n');
          // A live stream answers at once and never ends: a few seconds of it are enough.
          const streams = name === 'events.stream' ? 'CURL_MAX_TIME=3\n' : '';
          const result = await bash(`${CURL_STATUS_PRELUDE}${streams}${assignments}\n${sample}`, work);
          const status = result.statuses.at(-1) ?? 0;
          answers.push(`${name}: ${status}`);
          return { status, body: result.stdout, label: `${name}: ${status} ${result.stdout.slice(0, 500)}` };
        };
        const idOf = (body: string) => z.object({ id: z.string() }).parse(JSON.parse(body)).id;

        // What the others need, made by their own samples; each must succeed.
        const creates: [string, string | undefined][] = [
          ['webhooks.create', 'WEBHOOK_ID'],
          ['tags.create', 'TAG_ID'],
          ['tasks.create', 'TASK_ID'],
          // A second task, which the relation samples name.
          ['tasks.create', 'OTHER_TASK_ID'],
          ['tags.addToTask', undefined],
          ['attachments.upload', 'ATTACHMENT_ID'],
          ['comments.create', 'COMMENT_ID'],
          ['personalAccessTokens.create', 'TOKEN_ID'],
          ['users.create', undefined],
          ['projects.create', 'PROJECT_ID'],
          // The user users.create made joins the project.
          ['projects.addMember', undefined],
        ];
        for (const [name, variable] of creates) {
          const { status, body, label } = await runSample(name);
          expect(status, label).toBeGreaterThanOrEqual(200);
          expect(status, label).toBeLessThan(300);
          if (variable) variables[variable] = idOf(body);
        }
        // The webhook saw the task created: its delivery is the one the retry sample names.
        const deliveries = await service.http
          .get(`/webhooks/${variables.WEBHOOK_ID}/deliveries`)
          .set('Authorization', admin.auth)
          .expect(200);
        variables.DELIVERY_ID =
          z.object({ items: z.array(z.object({ id: z.string() })).min(1) }).parse(deliveries.body).items[0]?.id ?? '';

        // Then every other operation, the deletions and the logout last.
        const done = new Set(creates.map(([name]) => name));
        const rest = routes(contract).filter(([name]) => !done.has(name));
        const last = (name: string, route: AppRoute) =>
          name === 'auth.logout' ? 2 : route.method === 'DELETE' ? 1 : 0;
        rest.sort(([a, ra], [b, rb]) => last(a, ra) - last(b, rb));
        for (const [name, route] of rest) {
          const { status, label } = await runSample(name);
          expect(status, label).toBeGreaterThan(0);
          expect(status, label).toBeLessThan(500);
          // The samples' own credentials (login, refresh) are nobody's here: 401 for a public operation.
          // A pending first attempt is due already, so a manual retry of it is 409 conflict.
          const refused = isPublicRoute(route) ? [400, 405, 415] : [400, 401, 405, 415];
          expect(refused, label).not.toContain(status);
          if (isCreatingPost(route) && name !== 'webhooks.retry') expect(status, label).toBeLessThan(300);
        }
        expect(new Set(answers.map((answer) => answer.split(':')[0])).size).toBe(routes(contract).length);
      } finally {
        await server.close();
        await rm(work, { recursive: true, force: true });
      }
    },
  );

  it('type-check as calls of the typed client', { timeout: 240_000 }, async () => {
    // A directory of its own: the projects' CPU files run as threads of one process, so this test
    // runs twice at once under one pid, and each removes its directory when done.
    await mkdir(path.join(ROOT, '.test-data'), { recursive: true });
    const dir = await mkdtemp(path.join(ROOT, '.test-data', 'code-samples-'));
    try {
      const files = await Promise.all(
        routes(contract).map(async ([name]) => {
          const file = path.join(dir, `${name}.ts`);
          await writeFile(file, `${sampleOf(name, 'Typed client')}\nexport {};\n`);
          return file;
        }),
      );
      await writeFile(
        path.join(dir, 'tsconfig.json'),
        JSON.stringify({
          extends: '../../tsconfig.json',
          // The client as its users compile against it: its built declarations (global setup brings
          // the build up to date), not the contract's sources, which would be checked all over again.
          compilerOptions: { lib: ['ES2023', 'DOM'], types: [], customConditions: [] },
          include: [],
          files,
        }),
      );
      const result = await promisify(execFile)(
        process.execPath,
        [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', dir],
        { cwd: ROOT },
      ).catch((error: unknown) => error);
      expect(result).not.toBeInstanceOf(Error);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('the README', () => {
  it('is a front page of at most 300 lines, opening with why and a quick start, citing nothing outside the repository', async () => {
    const readme = await readFile(path.join(ROOT, 'README.md'), 'utf8');
    expect(readme.split('\n').length).toBeLessThanOrEqual(300);
    const sections = readme.split('\n## ').map((section) => section.split('\n')[0]);
    expect(sections.slice(1, 3)).toEqual(['Why pick it', 'Quick start']);
    expect(readme).not.toMatch(/shared\/|API\.md|STACK\.md|STYLE\.md|[Ii]ssue ?#?\d+/);
  });

  it('and /docs say what HEAD on attachment content does', () => {
    expect(operations.get('attachments.download')?.description).toContain('`HEAD` answers the same status and headers');
  });
});
