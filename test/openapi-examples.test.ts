// The examples of the OpenAPI document cannot drift from the contract: each is parsed with the schema
// of its operation and status, every operation has them, and the document shows exactly these.
import {
  isAppRoute,
  isAppRouteNoBody,
  isAppRouteOtherResponse,
  isZodType,
  type AppRoute,
  type AppRouter,
} from '@ts-rest/core';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { contract, problemCatalogue, ProblemCodeSchema, ProblemSchema } from '@task-service/client';
import { buildOpenApiDocument } from '../server/openapi/document.js';
import {
  examplePath,
  examplesByRoute,
  problemBody,
  problemExamples,
  type AnyOperationExamples,
} from '../server/openapi/examples.js';

function operationsOf(router: AppRouter, prefix: string[] = []): { id: string; route: AppRoute }[] {
  return Object.entries(router).flatMap(([key, entry]) =>
    isAppRoute(entry) ? [{ id: [...prefix, key].join('.'), route: entry }] : operationsOf(entry, [...prefix, key]),
  );
}
const operations = operationsOf(contract);

const examplesOf = (route: AppRoute): AnyOperationExamples => {
  const examples = examplesByRoute.get(route);
  if (!examples) throw new Error(`No examples for ${route.method} ${route.path}`);
  return examples;
};

const takesJsonBody = (route: AppRoute) =>
  'body' in route && isZodType(route.body) && !('contentType' in route && route.contentType === 'multipart/form-data');

const Media = z
  .object({ example: z.unknown().optional(), examples: z.record(z.object({ value: z.unknown() })).optional() })
  .passthrough();
const OperationDocument = z.object({
  requestBody: z.object({ content: z.record(Media) }).optional(),
  responses: z.record(z.object({ $ref: z.string().optional(), content: z.record(Media).optional() })),
});
const document = z
  .object({
    paths: z.record(z.record(OperationDocument)),
    components: z.object({ responses: z.record(z.object({ content: z.record(Media) })) }),
  })
  .parse(buildOpenApiDocument());
const operationDocument = (route: AppRoute) =>
  document.paths[route.path.replace(/:(\w+)/g, '{$1}')]?.[route.method.toLowerCase()];

describe('the examples of the OpenAPI document', () => {
  it.each(operations)('$id: a request example that its body schema accepts, for every JSON body', ({ route }) => {
    const { request } = examplesOf(route);
    if (!takesJsonBody(route) || !('body' in route) || !isZodType(route.body)) {
      expect(request).toBeUndefined();
      return;
    }
    expect(route.body.safeParse(request).error?.issues ?? []).toEqual([]);
  });

  it.each(operations)('$id: an example for every success answer with a body, accepted by its schema', ({ route }) => {
    const examples = examplesOf(route);
    for (const [code, declared] of Object.entries(route.responses)) {
      const status = Number(code);
      const where = `${route.method} ${route.path} ${status}`;
      if (isZodType(declared) && declared !== ProblemSchema && status < 300) {
        const parsed = declared.safeParse(examples.responses[status]);
        expect(parsed.error?.issues ?? [], where).toEqual([]);
        // Nothing the schema would strip: the example shows only fields the service sends.
        expect(parsed.data, where).toEqual(examples.responses[status]);
      } else if (isAppRouteOtherResponse(declared) && declared.contentType.startsWith('text/')) {
        expect(examples.text?.[status], where).toMatch(/\w/);
      }
    }
    // No example for an answer the operation does not give, or gives without a JSON body.
    for (const status of Object.keys(examples.responses)) {
      const declared = route.responses[Number(status)];
      expect(
        declared !== undefined && !isAppRouteNoBody(declared) && isZodType(declared),
        `${route.method} ${route.path} ${status}`,
      ).toBe(true);
    }
  });

  it.each(operations)('$id: its own problem examples carry a code of their status', ({ route }) => {
    for (const [code, problems] of Object.entries(examplesOf(route).problems ?? {})) {
      for (const problem of problems) {
        const body = ProblemSchema.strict().parse(problemBody(problem, route.path));
        expect(body).toMatchObject({
          status: Number(code),
          type: `/problems/${problem.code}`,
          title: problemCatalogue[problem.code].title,
          instance: examplePath(route.path),
        });
      }
    }
  });

  it('has an example of every problem code, with its own status', () => {
    for (const code of ProblemCodeSchema.options) {
      const body = ProblemSchema.strict().parse(problemBody(problemExamples[code], problemExamples[code].path));
      expect(body).toMatchObject({ code, status: problemCatalogue[code].status });
      expect(body.instance).not.toMatch(/[{}:]/);
    }
  });

  it('shows these examples in the document, and only problems of the status on each error answer', () => {
    for (const { route } of operations) {
      const operation = operationDocument(route);
      const examples = examplesOf(route);
      const where = `${route.method} ${route.path}`;
      for (const media of Object.values(operation?.requestBody?.content ?? {})) {
        if (takesJsonBody(route)) expect(media.example, where).toEqual(examples.request);
      }
      for (const [code, response] of Object.entries(operation?.responses ?? {})) {
        const status = Number(code);
        const shared = response.$ref
          ? document.components.responses[response.$ref.replace('#/components/responses/', '')]
          : undefined;
        const content = shared?.content ?? response.content ?? {};
        const media = content['application/problem+json'];
        if (status >= 400 && media) {
          const bodies = Object.values(media.examples ?? {}).map((example) =>
            ProblemSchema.strict().parse(example.value),
          );
          expect(bodies.length, `${where} ${status}`).toBeGreaterThan(0);
          for (const body of bodies)
            expect(problemCatalogue[body.code].status, `${where} ${status} ${body.code}`).toBe(status);
          if (examples.problems?.[status])
            expect(
              bodies.map((body) => body.code),
              `${where} ${status}`,
            ).toEqual(expect.arrayContaining(examples.problems[status].map((problem) => problem.code)));
        } else if (content['application/json']) {
          expect(content['application/json'].example, `${where} ${status}`).toEqual(examples.responses[status]);
        }
      }
    }
  });
});
