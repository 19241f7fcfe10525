import { execFile } from 'node:child_process';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { isAppRoute, isAppRouteNoBody, type AppRoute, type AppRouter } from '@ts-rest/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { contract } from '../contract/index.js';
import { SAMPLE_BASE_URL } from '../server/openapi/code-samples.js';
import { startService, type TestService } from './support/app.js';
import { listen } from './support/listening.js';
import { registerUser } from './support/users.js';

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

let service: TestService;
let operations: Map<string, z.infer<typeof OperationSchema>>;
beforeAll(async () => {
  service = await startService();
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
afterAll(() => service.close());

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
      const pattern = new RegExp(`^${SAMPLE_BASE_URL.replace(/\./g, '\\.')}${route.path.replace(/:\w+/g, '[^/]+')}$`);
      expect(request.url, name).toMatch(pattern);
      if (
        'body' in route &&
        route.body instanceof z.ZodType &&
        !isAppRouteNoBody(route.body) &&
        request.body !== undefined
      ) {
        const parsed = route.body.safeParse(JSON.parse(request.body));
        expect(parsed.success, `${name}: ${request.body}`).toBe(true);
      }
    }
  });

  it(
    'are requests the service accepts: none is refused as malformed, unsupported or unknown',
    { timeout: 120_000 },
    async () => {
      const server = await listen(service);
      try {
        for (const [name] of routes(contract)) {
          const request = parseCurl(sampleOf(name, 'curl'));
          const user = await registerUser(service);
          const headers = Object.fromEntries(
            Object.entries(request.headers).map(([header, value]) => [
              header,
              value.replace('$TOKEN', user.accessToken),
            ]),
          );
          let body: string | FormData | undefined = request.body;
          if (request.file) {
            body = new FormData();
            body.append('file', new Blob(['the bytes of report.pdf'], { type: 'application/pdf' }), 'report.pdf');
          }
          const url = new URL(request.url);
          // The live stream never ends by itself: its status and headers are the answer.
          const res = await fetch(`${server.baseUrl}${url.pathname}${url.search}`, {
            method: request.method,
            headers,
            body,
            signal: AbortSignal.timeout(10_000),
          });
          const text = res.headers.get('content-type')?.startsWith('text/event-stream')
            ? (await res.body?.cancel(), '')
            : await res.text();
          // The examples' ids name nothing here (404), some operations are an admin's (403), and the examples'
          // own credentials (login, refresh) are nobody's (401 without a bearer token); the request itself must be right.
          // A 400 may only name ids of the examples that do not exist here (`unknown_tag`, `unknown_user`).
          const references = z
            .object({ errors: z.array(z.object({ code: z.string() })) })
            .safeParse(res.status === 400 ? JSON.parse(text) : undefined);
          const unknownIdsOnly =
            res.status === 400 &&
            references.success &&
            references.data.errors.every((error) => error.code.startsWith('unknown_'));
          const refused = request.headers.authorization ? [400, 401, 405, 415] : [400, 405, 415];
          if (!unknownIdsOnly)
            expect(refused, `${name}: ${res.status} ${text.slice(0, 500)}`).not.toContain(res.status);
        }
      } finally {
        await server.close();
      }
    },
  );

  it('type-check as calls of the typed client', { timeout: 240_000 }, async () => {
    const dir = path.join(ROOT, '.test-data', `code-samples-${process.pid}`);
    await mkdir(dir, { recursive: true });
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
          compilerOptions: { lib: ['ES2023', 'DOM'], types: [] },
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
