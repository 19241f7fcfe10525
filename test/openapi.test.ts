import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { dereference, validate } from '@readme/openapi-parser';
import { isAppRoute, type AppRoute, type AppRouter } from '@ts-rest/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  contract,
  isLoginOnly,
  isPublicRoute,
  ProblemCodeSchema,
  problemCatalogue,
  ProblemPageSchema,
  scopeOf,
  SCOPES,
} from '../contract/index.js';
import { serviceForFile } from './support/app.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

const MediaSchema = z.object({ schema: z.record(z.unknown()) }).passthrough();
const ResponseSchema = z
  .object({
    description: z.string(),
    headers: z.record(z.unknown()).optional(),
    content: z.record(MediaSchema).optional(),
  })
  .passthrough();
const OperationSchema = z.object({
  operationId: z.string(),
  summary: z.string(),
  tags: z.array(z.string()),
  security: z.array(z.record(z.array(z.string()))),
  parameters: z
    .array(
      z.object({
        name: z.string(),
        in: z.string(),
        description: z.string().optional(),
        style: z.string().optional(),
        explode: z.boolean().optional(),
        schema: z.record(z.unknown()),
      }),
    )
    .optional(),
  requestBody: z.object({ required: z.boolean(), content: z.record(MediaSchema) }).optional(),
  responses: z.record(ResponseSchema),
});
const DocumentSchema = z.object({
  openapi: z.string(),
  info: z.object({ title: z.string(), version: z.string() }),
  paths: z.record(z.record(OperationSchema)),
  components: z.object({
    securitySchemes: z.object({
      bearerAuth: z.object({ type: z.string(), scheme: z.string(), bearerFormat: z.string() }),
      oauth2: z.object({
        type: z.literal('oauth2'),
        flows: z.object({
          authorizationCode: z.object({
            authorizationUrl: z.string(),
            tokenUrl: z.string(),
            refreshUrl: z.string(),
            scopes: z.record(z.string()),
          }),
        }),
      }),
    }),
  }),
});
type Document = z.infer<typeof DocumentSchema>;

interface ContractOperation {
  id: string;
  route: AppRoute;
}
function operationsOf(router: AppRouter, prefix: string[] = []): ContractOperation[] {
  return Object.entries(router).flatMap(([key, entry]) =>
    isAppRoute(entry) ? [{ id: [...prefix, key].join('.'), route: entry }] : operationsOf(entry, [...prefix, key]),
  );
}
const operations = operationsOf(contract);
const openApiPath = (route: AppRoute) => route.path.replace(/:(\w+)/g, '{$1}');

const service = serviceForFile();
let workDir: string;
let served: unknown;
let documentFile: string;
/** The served document with every $ref resolved. */
let document: Document;

beforeAll(async () => {
  workDir = await mkdtemp(path.join(tmpdir(), 'openapi-test-'));
  const res = await service.http
    .get('/openapi.json')
    .expect(200)
    .expect('Content-Type', /^application\/json/);
  served = res.body;
  documentFile = path.join(workDir, 'served.json');
  await writeFile(documentFile, JSON.stringify(served));
  document = DocumentSchema.parse(await dereference(documentFile));
});
afterAll(async () => {
  await rm(workDir, { recursive: true, force: true });
});

const operationFor = (route: AppRoute) => document.paths[openApiPath(route)]?.[route.method.toLowerCase()];

describe('GET /openapi.json', () => {
  it('is a valid OpenAPI 3 document (@readme/openapi-parser)', async () => {
    const result = await validate(documentFile);
    expect(result.valid ? [] : result.errors.map((error) => error.message)).toEqual([]);
    expect(result.warnings).toEqual([]);
    expect(document.openapi).toMatch(/^3\./);
  });

  it('carries the package version', async () => {
    const pkg = z
      .object({ version: z.string() })
      .parse(JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8')));
    expect(document.info.version).toBe(pkg.version);
  });

  it('describes every operation of the contract, with a unique operationId and every declared status', () => {
    for (const { id, route } of operations) {
      const operation = operationFor(route);
      expect(operation, `${route.method} ${route.path}`).toBeDefined();
      expect(operation?.operationId).toBe(id);
      expect(Object.keys(operation?.responses ?? {})).toEqual(expect.arrayContaining(Object.keys(route.responses)));
    }
    const ids = Object.values(document.paths).flatMap((item) =>
      Object.values(item).map((operation) => operation.operationId),
    );
    expect(ids).toHaveLength(operations.length);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('names the OAuth flow for apps and its scopes, those of personal access tokens', () => {
    expect(document.components.securitySchemes.oauth2.flows.authorizationCode).toMatchObject({
      authorizationUrl: '/oauth/authorize',
      tokenUrl: '/oauth/token',
      refreshUrl: '/oauth/token',
    });
    expect(Object.keys(document.components.securitySchemes.oauth2.flows.authorizationCode.scopes)).toEqual([...SCOPES]);
  });

  it('requires the bearer token on every operation not marked public, or an app’s OAuth token with its scope', () => {
    expect(document.components.securitySchemes.bearerAuth).toMatchObject({
      type: 'http',
      scheme: 'bearer',
      bearerFormat: 'JWT',
    });
    for (const { route } of operations) {
      expect(operationFor(route)?.security, `${route.method} ${route.path}`).toEqual(
        isPublicRoute(route)
          ? []
          : isLoginOnly(route) || scopeOf(route) === undefined
            ? [{ bearerAuth: [] }]
            : [{ bearerAuth: [] }, { oauth2: [scopeOf(route)] }],
      );
    }
    // The public operations (docs/api-guide.md), /problems/{code} included.
    const publicPaths = operations
      .filter(({ route }) => isPublicRoute(route))
      .map(({ route }) => `${route.method} ${route.path}`);
    expect(publicPaths.sort()).toEqual(
      [
        'POST /auth/register',
        'POST /auth/login',
        'POST /auth/refresh',
        'GET /healthz',
        'GET /readyz',
        'GET /.well-known/jwks.json',
        'GET /openapi.json',
        'GET /docs',
        'GET /problems',
        'GET /problems/:code',
      ].sort(),
    );
  });

  it('describes error answers as application/problem+json and successes with their schema', () => {
    for (const { route } of operations) {
      for (const [status, response] of Object.entries(operationFor(route)?.responses ?? {})) {
        const where = `${route.method} ${route.path} ${status}`;
        const isReadinessAnswer = route === contract.service.readyz;
        if (Number(status) >= 400 && !isReadinessAnswer) {
          expect(Object.keys(response.content ?? {}), where).toEqual(['application/problem+json']);
          expect(response.content?.['application/problem+json']?.schema.required, where).toEqual(
            expect.arrayContaining(['type', 'title', 'status', 'code', 'detail', 'instance', 'requestId']),
          );
        } else if ([204, 304].includes(Number(status))) {
          expect(response.content, where).toBeUndefined();
        } else {
          expect(Object.values(response.content ?? {}).length, where).toBe(1);
        }
      }
    }
    expect(operationFor(contract.tasks.get)?.responses['200']?.content?.['application/json']?.schema.required).toEqual(
      expect.arrayContaining(['id', 'version', 'tags']),
    );
    expect(operationFor(contract.auth.logout)?.responses['401']?.headers).toHaveProperty('WWW-Authenticate');
    expect(operationFor(contract.tasks.list)?.responses['429']?.headers).toHaveProperty('Retry-After');
  });

  it('describes the multipart upload and the binary download', () => {
    const upload = operationFor(contract.attachments.upload)?.requestBody;
    expect(Object.keys(upload?.content ?? {})).toEqual(['multipart/form-data']);
    const form = upload?.content['multipart/form-data']?.schema;
    expect(form?.required).toEqual(['file']);
    expect(form?.properties).toEqual({ file: expect.objectContaining({ type: 'string', format: 'binary' }) });

    const download = operationFor(contract.attachments.download)?.responses;
    for (const status of ['200', '206']) {
      expect(download?.[status]?.content?.['*/*']?.schema).toEqual({ type: 'string', format: 'binary' });
      expect(download?.[status]?.headers).toHaveProperty('Content-Disposition');
    }
    expect(download?.['206']?.headers).toHaveProperty('Content-Range');
  });

  it('documents comma-separated filters as arrays and merge-patch bodies', () => {
    const status = operationFor(contract.tasks.list)?.parameters?.find((parameter) => parameter.name === 'status');
    expect(status).toMatchObject({
      in: 'query',
      style: 'form',
      explode: false,
      schema: { type: 'array', items: { enum: ['todo', 'in_progress', 'done'] } },
    });
    expect(Object.keys(operationFor(contract.tasks.update)?.requestBody?.content ?? {})).toEqual([
      'application/json',
      'application/merge-patch+json',
    ]);
  });

  it('is what `npm run openapi` writes', async () => {
    const target = path.join(workDir, 'written', 'openapi.json');
    await promisify(execFile)(process.execPath, ['scripts/run.mjs', 'server/cli/openapi', target], { cwd: ROOT });
    // Written for http://localhost:3000, as served to a request that reached the service there.
    const local = await service.http.get('/openapi.json').set('Host', 'localhost:3000').expect(200);
    expect(JSON.parse(await readFile(target, 'utf8'))).toEqual(local.body);
  });

  it('names in its samples the URL each request reached, and only a well-formed one', async () => {
    const text = (host: string) =>
      service.http
        .get('/openapi.json')
        .set('Host', host)
        .expect(200)
        .then((res) => res.text);
    expect(await text('tasks.example.com')).toContain('"curl -X POST \\"http://tasks.example.com/tasks\\"');
    expect(await text('[::1]:8080')).toContain("baseUrl: 'http://[::1]:8080'");
    const odd = await text("evil.example'$(reboot)");
    expect(odd).not.toContain('reboot');
    expect(odd).toContain('http://localhost:3000/tasks');
  });
});

describe('GET /docs', () => {
  it('is a reference page over /openapi.json whose assets the service serves itself', async () => {
    const page = await service.http
      .get('/docs')
      .expect(200)
      .expect('Content-Type', /^text\/html/);
    expect(page.headers['content-security-policy']).toContain("default-src 'self'");
    const assets = [...page.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((match) => match[1] ?? '');
    const names = assets.map((href) => /^\/docs\/assets\/[0-9a-f]{12}\/([\w.-]+)$/.exec(href)?.[1]);
    expect(names).toEqual(expect.arrayContaining(['swagger-ui.css', 'swagger-ui-bundle.js', 'reference.js']));
    for (const asset of assets.filter((href) => href.startsWith('/docs/'))) {
      const res = await service.http.get(asset).expect(200);
      expect(Number(res.headers['content-length'] ?? res.text.length), asset).toBeGreaterThan(0);
      expect(res.headers['cache-control'], asset).toBe('public, max-age=31536000, immutable');
    }
    const scriptPath = assets.find((href) => href.endsWith('/reference.js')) ?? '';
    const script = await service.http.get(scriptPath).expect('Content-Type', /javascript/);
    expect(script.text).toContain("url: '/openapi.json'");
  });

  it('sends the assets compressed (brotli, else gzip) and the bundle far smaller than it is', async () => {
    const page = await service.http.get('/docs').expect(200);
    const bundle = /src="(\/docs\/assets\/[0-9a-f]+\/swagger-ui-bundle\.js)"/.exec(page.text)?.[1] ?? '';
    const plain = await service.http.get(bundle).set('Accept-Encoding', 'identity').expect(200);
    expect(plain.headers['content-encoding']).toBeUndefined();
    const size = Number(plain.headers['content-length']);
    for (const [accept, encoding] of [
      ['gzip, deflate, br', 'br'],
      ['gzip', 'gzip'],
      ['br;q=0, gzip', 'gzip'],
    ] as const) {
      const res = await service.http
        .get(bundle)
        .set('Accept-Encoding', accept)
        .buffer(true)
        .parse((r, done) => {
          const chunks: Buffer[] = [];
          r.on('data', (chunk: Buffer) => chunks.push(chunk));
          r.on('end', () => done(null, Buffer.concat(chunks)));
        })
        .expect(200);
      expect(res.headers['content-encoding'], accept).toBe(encoding);
      expect(res.headers.vary).toContain('Accept-Encoding');
      expect(Number(res.headers['content-length']), accept).toBeLessThan(size / 3);
    }
  });

  it('answers 404 for an asset of another version', async () => {
    await service.http.get('/docs/assets/000000000000/swagger-ui.css').expect(404);
  });

  it('answers 404 for files it does not serve', async () => {
    const res = await service.http
      .get('/docs/assets/package.json')
      .expect(404)
      .expect('Content-Type', /application\/problem\+json/);
    expect(res.body.code).toBe('not_found');
    await service.http.get('/docs/assets/..%2Fpackage.json').expect(404);
    const page = await service.http.get('/docs').expect(200);
    const version = /\/docs\/assets\/([0-9a-f]+)\//.exec(page.text)?.[1] ?? '';
    await service.http.get(`/docs/assets/${version}/package.json`).expect(404);
    await service.http.get(`/docs/assets/${version}/..%2F..%2Fpackage.json`).expect(404);
  });
});

describe('GET /problems/{code}', () => {
  it("resolves every problem's type: what the code means and what to do", async () => {
    const catalogue = await service.http.get('/problems').expect(200);
    const codes = catalogue.body.items.map((item: { code: string }) => item.code);
    expect(codes).toEqual(ProblemCodeSchema.options);
    for (const code of ProblemCodeSchema.options) {
      const page = await service.http.get(`/problems/${code}`).expect(200);
      expect(ProblemPageSchema.strict().parse(page.body)).toMatchObject({ code });
      expect(page.body.meaning.length).toBeGreaterThan(10);
      expect(page.body.action.length).toBeGreaterThan(10);
    }
    // A problem body's type, resolved against the request URL, is that page.
    const missing = await service.http.get('/tasks/00000000-0000-7000-8000-000000000000');
    const type = new URL(missing.body.type, 'http://service.example/tasks/x').pathname;
    expect((await service.http.get(type).expect(200)).body).toMatchObject({
      code: missing.body.code,
      status: missing.status,
    });
  });

  it('answers 404 for an unknown code and needs no token', async () => {
    const res = await service.http.get('/problems/no_such_code').expect(404);
    expect(res.body.code).toBe('not_found');
  });
});

/** Every `properties` entry below `node` that is written out (not a $ref) without a description, by its path. */
function undescribedFields(node: unknown, where: string): string[] {
  if (Array.isArray(node)) return node.flatMap((item, index) => undescribedFields(item, `${where}/${index}`));
  if (typeof node !== 'object' || node === null) return [];
  const own =
    'properties' in node && typeof node.properties === 'object' && node.properties !== null
      ? Object.entries(node.properties)
          .filter(
            ([, field]) =>
              !z
                .object({ description: z.string().min(3) })
                .or(z.object({ $ref: z.string() }))
                .safeParse(field).success,
          )
          .map(([name]) => `${where}.${name}`)
      : [];
  return [...own, ...Object.entries(node).flatMap(([key, value]) => undescribedFields(value, `${where}/${key}`))];
}

describe('the documentation in the document', () => {
  it("explains every parameter and every field of every body, from the contract's .describe()", () => {
    const documented = z
      .object({
        paths: z.record(
          z.record(
            z.object({
              parameters: z
                .array(z.object({ name: z.string(), in: z.string(), description: z.string().optional() }))
                .optional(),
            }),
          ),
        ),
        components: z.object({ schemas: z.record(z.unknown()) }),
      })
      .parse(served);
    const undescribedParameters = Object.entries(documented.paths).flatMap(([route, methods]) =>
      Object.entries(methods).flatMap(([method, operation]) =>
        (operation.parameters ?? [])
          .filter((parameter) => !parameter.description)
          .map((parameter) => `${method} ${route} ${parameter.in} ${parameter.name}`),
      ),
    );
    expect(undescribedParameters).toEqual([]);
    expect(undescribedFields(documented.paths, 'paths')).toEqual([]);
    expect(undescribedFields(documented.components.schemas, 'components/schemas')).toEqual([]);
    // Named models keep their fields' descriptions, and headers carry theirs on the parameter.
    expect(documented.components.schemas).toHaveProperty(
      ['Task', 'properties', 'version', 'description'],
      expect.stringContaining('ETag'),
    );
    // A field that is a named model, described where it is used, keeps both.
    expect(documented.components.schemas).toHaveProperty(['AuthResult', 'properties', 'user'], {
      description: 'The account the tokens are for',
      allOf: [{ $ref: '#/components/schemas/User' }],
    });
    const ifMatch = operationFor(contract.tasks.replace)?.parameters?.find(
      (parameter) => parameter.name === 'if-match',
    );
    expect(ifMatch).toMatchObject({ in: 'header', description: expect.stringContaining('412') });
  });

  it('describes every operation and gives each error response a matching example', () => {
    const documented = z
      .object({
        paths: z.record(z.record(z.object({ description: z.string().optional() }))),
        components: z.object({ responses: z.unknown() }),
      })
      .parse(served);
    for (const [route, methods] of Object.entries(documented.paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        expect(operation.description, `${method} ${route}`).toMatch(/\w{3,}/);
      }
    }
    const Example = z.object({ value: z.object({ status: z.number(), code: z.string(), type: z.string() }) });
    const responses = z
      .record(z.object({ content: z.record(z.object({ examples: z.record(Example) })) }))
      .parse(documented.components.responses);
    expect(Object.keys(responses).length).toBeGreaterThan(0);
    for (const response of Object.values(responses)) {
      const examples = Object.values(response.content['application/problem+json']?.examples ?? {});
      expect(examples.length).toBeGreaterThan(0);
      for (const { value } of examples) {
        expect(value.type).toBe(`/problems/${value.code}`);
        expect(problemCatalogue[ProblemCodeSchema.parse(value.code)].status).toBe(value.status);
      }
    }
    // An operation shows its own codes: a 412 is precondition_failed, a tag's 409 tag_name_taken.
    const problemCodes = (route: AppRoute, status: string) =>
      Object.values(
        z
          .object({ content: z.record(z.object({ examples: z.record(Example) })) })
          .parse(operationFor(route)?.responses[status]).content['application/problem+json']?.examples ?? {},
      ).map(({ value }) => value.code);
    expect(problemCodes(contract.tasks.update, '412')).toEqual(['precondition_failed']);
    expect(problemCodes(contract.tags.create, '409')).toEqual(
      expect.arrayContaining(['tag_name_taken', 'quota_exceeded', 'idempotency_key_in_use']),
    );
    expect(problemCodes(contract.tags.create, '409')).not.toContain('email_taken');
  });
});
