// An error answer stays small whatever the input. At most 20 issues (then
// `truncated`), at most 16 KiB, every request array and string bounded in the contract and the
// bound checked before the items, and nothing of it kept under an Idempotency-Key.
import { isAppRoute, type AppRoute, type AppRouter } from '@ts-rest/core';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { tables } from '../server/db/query.js';
import { countOf } from './support/rows.js';
import { contract } from '../contract/index.js';
import { serviceForFile } from './support/app.js';
import { expectProblem } from './support/problems.js';
import { userForFile } from './support/users.js';

const MAX_PROBLEM_BYTES = 16 * 1024;

function routesOf(router: AppRouter, prefix = ''): [string, AppRoute][] {
  return Object.entries(router).flatMap(([name, entry]) =>
    isAppRoute(entry) ? [[`${prefix}${name}`, entry] as [string, AppRoute]] : routesOf(entry, `${prefix}${name}.`),
  );
}

interface Found {
  path: string;
  schema: z.ZodTypeAny;
  /** The descriptions on the way from the field to this schema. */
  described: boolean;
}

/** Every string and array schema a request schema holds, with whether its field is described. */
function stringsAndArrays(
  schema: z.ZodTypeAny,
  path: string,
  described = false,
  seen = new Set<z.ZodTypeAny>(),
): Found[] {
  if (seen.has(schema)) return [];
  seen.add(schema);
  const here = described || schema.description !== undefined;
  const walk = (inner: z.ZodTypeAny, at = path) => stringsAndArrays(inner, at, here, seen);
  if (schema instanceof z.ZodString) return [{ path, schema, described: here }];
  if (schema instanceof z.ZodArray) return [{ path, schema, described: here }, ...walk(schema.element, `${path}[]`)];
  if (schema instanceof z.ZodObject) {
    const shape = schema.shape as Record<string, z.ZodTypeAny>;
    return Object.entries(shape).flatMap(([key, field]) => stringsAndArrays(field, `${path}.${key}`, false, seen));
  }
  if (schema instanceof z.ZodOptional || schema instanceof z.ZodNullable) return walk(schema.unwrap());
  if (schema instanceof z.ZodDefault) return walk(schema.removeDefault());
  if (schema instanceof z.ZodEffects) return walk(schema.innerType());
  if (schema instanceof z.ZodPipeline) return [...walk(schema._def.in), ...walk(schema._def.out)];
  if (schema instanceof z.ZodUnion || schema instanceof z.ZodDiscriminatedUnion)
    return (schema.options as z.ZodTypeAny[]).flatMap((option) => walk(option));
  return [];
}

const requestSchemas = (route: AppRoute): [string, z.ZodTypeAny][] =>
  (['pathParams', 'query', 'headers', 'body'] as const).flatMap((part) => {
    const schema: unknown = part in route ? route[part as keyof AppRoute] : undefined;
    return schema instanceof z.ZodType ? [[part, schema] as [string, z.ZodTypeAny]] : [];
  });

const hasBound = (schema: z.ZodString): boolean =>
  schema._def.checks.some(
    (check) => check.kind === 'max' || check.kind === 'length' || check.kind === 'uuid' || check.kind === 'datetime',
  );

describe('the contract bounds every request array and string', () => {
  const found = routesOf(contract).flatMap(([name, route]) =>
    requestSchemas(route).flatMap(([part, schema]) => stringsAndArrays(schema, `${name} ${part}`)),
  );

  it('finds the request schemas it checks', () => {
    expect(found.filter((f) => f.schema instanceof z.ZodArray).length).toBeGreaterThan(3);
    expect(found.filter((f) => f.schema instanceof z.ZodString).length).toBeGreaterThan(30);
  });

  it('gives every string a maximum (or a fixed form: a UUID, a timestamp) and every field a description', () => {
    const unbounded = found.filter((f) => f.schema instanceof z.ZodString && !hasBound(f.schema)).map((f) => f.path);
    expect(unbounded).toEqual([]);
    // Path parameters, header values and query values are described at their object; body fields each.
    const undescribed = found.filter((f) => !f.described && !f.path.includes('[]')).map((f) => f.path);
    expect(undescribed).toEqual([]);
  });

  it('gives every array a maximum, checked before its items: 100,000 bad items give one issue', () => {
    const arrays = found.filter(
      (f): f is Found & { schema: z.ZodArray<z.ZodTypeAny> } => f.schema instanceof z.ZodArray,
    );
    for (const { path, schema } of arrays) {
      expect(schema._def.maxLength, path).not.toBeNull();
    }
    // Each array field, as its route's schema parses it: the bound is checked first.
    for (const [name, route] of routesOf(contract)) {
      for (const [part, schema] of requestSchemas(route)) {
        const object = schema instanceof z.ZodEffects ? schema.innerType() : schema;
        if (!(object instanceof z.ZodObject)) continue;
        for (const [key, field] of Object.entries(object.shape as Record<string, z.ZodTypeAny>)) {
          if (!stringsAndArrays(field, key).some((f) => f.schema instanceof z.ZodArray)) continue;
          const result = field.safeParse(Array.from({ length: 100_000 }, () => ({ bad: true })));
          expect(result.success, `${name} ${part}.${key}`).toBe(false);
          expect(result.error?.issues.length, `${name} ${part}.${key}`).toBe(1);
        }
      }
    }
  });
});

describe('error answers stay small', () => {
  const service = serviceForFile();
  const alice = userForFile(service);

  it('answers 150,000 bad array items with one issue in a small body', async () => {
    const res = await service.http
      .post('/tasks')
      .set('Authorization', alice.auth)
      .send({ title: 'many tags', tagIds: Array.from({ length: 150_000 }, () => 'x') });
    const problem = expectProblem(res, 400, 'validation_failed');
    expect(Buffer.byteLength(res.text)).toBeLessThan(2048);
    expect(problem.errors).toEqual([expect.objectContaining({ path: 'body.tagIds', code: 'too_big' })]);
  });

  it('lists at most 20 issues, then says truncated at the top level', async () => {
    const statuses = Array.from({ length: 40 }, (_, i) => `bad${i}`).join(',');
    const res = await service.http.get('/tasks').query({ status: statuses }).set('Authorization', alice.auth);
    expect(res.status).toBe(400);
    const body = z
      .object({ errors: z.array(z.unknown()), truncated: z.literal(true) })
      .passthrough()
      .parse(res.body);
    expect(body.errors).toHaveLength(20);
    expect(Buffer.byteLength(res.text)).toBeLessThanOrEqual(MAX_PROBLEM_BYTES);
    // Under the limit, no flag.
    const few = await service.http.get('/tasks').query({ status: 'bad1,bad2' }).set('Authorization', alice.auth);
    expect(expectProblem(few, 400, 'validation_failed').errors).toHaveLength(2);
    expect(few.body).not.toHaveProperty('truncated');
  });

  it('keeps a 4xx body within 16 KiB when the input names huge keys or values', async () => {
    const hugeKey = { title: 'x', ['k'.repeat(900_000)]: 1 };
    const keyed = await service.http.post('/tasks').set('Authorization', alice.auth).send(hugeKey);
    expectProblem(keyed, 400, 'validation_failed');
    expect(Buffer.byteLength(keyed.text)).toBeLessThanOrEqual(MAX_PROBLEM_BYTES);
    const manyKeys = Object.fromEntries([
      ['title', 'x'],
      ...Array.from({ length: 30_000 }, (_, i) => [`unknown${i}`, i]),
    ]);
    const many = await service.http.post('/tasks').set('Authorization', alice.auth).send(manyKeys);
    expectProblem(many, 400, 'validation_failed');
    expect(Buffer.byteLength(many.text)).toBeLessThanOrEqual(MAX_PROBLEM_BYTES);
    const longPath = await service.http.get(`/tasks/${'x'.repeat(15_000)}`).set('Authorization', alice.auth);
    expect(longPath.status).toBe(400);
    expect(Buffer.byteLength(longPath.text)).toBeLessThanOrEqual(MAX_PROBLEM_BYTES);
  });

  it('keeps nothing under an Idempotency-Key for a request the contract refused', async () => {
    const kept = async () =>
      countOf(service.ctx.db.sql, tables.selectFrom('idempotency_keys').where('user_id', '=', alice.user.id));
    const before = await kept();
    const res = await service.http
      .post('/tasks')
      .set('Authorization', alice.auth)
      .set('Idempotency-Key', 'huge-refused-body')
      .send({ title: 'keyed', tagIds: Array.from({ length: 150_000 }, () => 'x') });
    expectProblem(res, 400, 'validation_failed');
    expect(await kept()).toBe(before);
    // The retry is validated again, not replayed.
    const retry = await service.http
      .post('/tasks')
      .set('Authorization', alice.auth)
      .set('Idempotency-Key', 'huge-refused-body')
      .send({ title: 'keyed' });
    expect(retry.status).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBeUndefined();
  });
});
