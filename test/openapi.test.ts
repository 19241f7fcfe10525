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
import { contract, isPublicRoute } from '../contract/index.js';
import { startService, type TestService } from './support/app.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

const MediaSchema = z.object({ schema: z.record(z.unknown()) });
const ResponseSchema = z.object({ description: z.string(), headers: z.record(z.unknown()).optional(), content: z.record(MediaSchema).optional() });
const OperationSchema = z.object({
  operationId: z.string(),
  summary: z.string(),
  tags: z.array(z.string()),
  security: z.array(z.record(z.array(z.string()))),
  parameters: z.array(z.object({ name: z.string(), in: z.string(), style: z.string().optional(), explode: z.boolean().optional(), schema: z.record(z.unknown()) })).optional(),
  requestBody: z.object({ required: z.boolean(), content: z.record(MediaSchema) }).optional(),
  responses: z.record(ResponseSchema),
});
const DocumentSchema = z.object({
  openapi: z.string(),
  info: z.object({ title: z.string(), version: z.string() }),
  paths: z.record(z.record(OperationSchema)),
  components: z.object({ securitySchemes: z.record(z.object({ type: z.string(), scheme: z.string(), bearerFormat: z.string() })) }),
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

let service: TestService;
let workDir: string;
let served: unknown;
let documentFile: string;
/** The served document with every $ref resolved. */
let document: Document;

beforeAll(async () => {
  service = await startService();
  workDir = await mkdtemp(path.join(tmpdir(), 'openapi-test-'));
  const res = await service.http.get('/openapi.json').expect(200).expect('Content-Type', /^application\/json/);
  served = res.body;
  documentFile = path.join(workDir, 'served.json');
  await writeFile(documentFile, JSON.stringify(served));
  document = DocumentSchema.parse(await dereference(documentFile));
});
afterAll(async () => {
  await rm(workDir, { recursive: true, force: true });
  await service.close();
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
    const pkg = z.object({ version: z.string() }).parse(JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8')));
    expect(document.info.version).toBe(pkg.version);
  });

  it('describes every operation of the contract, with a unique operationId and every declared status', () => {
    for (const { id, route } of operations) {
      const operation = operationFor(route);
      expect(operation, `${route.method} ${route.path}`).toBeDefined();
      expect(operation?.operationId).toBe(id);
      expect(Object.keys(operation?.responses ?? {})).toEqual(expect.arrayContaining(Object.keys(route.responses)));
    }
    const ids = Object.values(document.paths).flatMap((item) => Object.values(item).map((operation) => operation.operationId));
    expect(ids).toHaveLength(operations.length);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('requires the bearer token on every operation not marked public', () => {
    expect(document.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer', bearerFormat: 'JWT' });
    for (const { route } of operations) {
      expect(operationFor(route)?.security, `${route.method} ${route.path}`).toEqual(isPublicRoute(route) ? [] : [{ bearerAuth: [] }]);
    }
    const publicPaths = operations.filter(({ route }) => isPublicRoute(route)).map(({ route }) => `${route.method} ${route.path}`);
    expect(publicPaths.sort()).toEqual(
      ['POST /auth/register', 'POST /auth/login', 'POST /auth/refresh', 'GET /healthz', 'GET /readyz', 'GET /.well-known/jwks.json', 'GET /openapi.json', 'GET /docs'].sort(),
    );
  });

  it('describes error answers as application/problem+json and successes with their schema', () => {
    for (const { route } of operations) {
      for (const [status, response] of Object.entries(operationFor(route)?.responses ?? {})) {
        const where = `${route.method} ${route.path} ${status}`;
        const isReadinessAnswer = route === contract.service.readyz;
        if (Number(status) >= 400 && !isReadinessAnswer) {
          expect(Object.keys(response.content ?? {}), where).toEqual(['application/problem+json']);
          expect(response.content?.['application/problem+json']?.schema.required, where).toEqual(expect.arrayContaining(['type', 'title', 'status', 'code', 'detail', 'instance', 'requestId']));
        } else if ([204, 304].includes(Number(status))) {
          expect(response.content, where).toBeUndefined();
        } else {
          expect(Object.values(response.content ?? {}).length, where).toBe(1);
        }
      }
    }
    expect(operationFor(contract.tasks.get)?.responses['200']?.content?.['application/json']?.schema.required).toEqual(expect.arrayContaining(['id', 'version', 'tags']));
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
    expect(status).toMatchObject({ in: 'query', style: 'form', explode: false, schema: { type: 'array', items: { enum: ['todo', 'in_progress', 'done'] } } });
    expect(Object.keys(operationFor(contract.tasks.update)?.requestBody?.content ?? {})).toEqual(['application/json', 'application/merge-patch+json']);
  });

  it('is what `npm run openapi` writes', async () => {
    const target = path.join(workDir, 'written', 'openapi.json');
    await promisify(execFile)(process.execPath, ['--import', 'tsx', 'server/openapi/write.ts', target], { cwd: ROOT });
    expect(JSON.parse(await readFile(target, 'utf8'))).toEqual(served);
  });
});

describe('GET /docs', () => {
  it('is a reference page over /openapi.json whose assets the service serves itself', async () => {
    const page = await service.http.get('/docs').expect(200).expect('Content-Type', /^text\/html/);
    expect(page.headers['content-security-policy']).toContain("default-src 'self'");
    const assets = [...page.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((match) => match[1] ?? '');
    expect(assets).toEqual(expect.arrayContaining(['/docs/assets/swagger-ui.css', '/docs/assets/swagger-ui-bundle.js', '/docs/assets/reference.js']));
    for (const asset of assets.filter((href) => href.startsWith('/docs/'))) {
      const res = await service.http.get(asset).expect(200);
      expect(Number(res.headers['content-length'] ?? res.text.length), asset).toBeGreaterThan(0);
    }
    const script = await service.http.get('/docs/assets/reference.js').expect('Content-Type', /javascript/);
    expect(script.text).toContain("url: '/openapi.json'");
  });

  it('answers 404 for files it does not serve', async () => {
    const res = await service.http.get('/docs/assets/package.json').expect(404).expect('Content-Type', /application\/problem\+json/);
    expect(res.body.code).toBe('not_found');
    await service.http.get('/docs/assets/..%2Fpackage.json').expect(404);
  });
});
