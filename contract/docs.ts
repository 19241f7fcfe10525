import { z } from 'zod';
import { c, ProblemSchema, type Named } from './common.js';
import { ProblemPageSchema } from './problems.js';

/** The parts of an OpenAPI 3 document a client may rely on; the rest passes through. */
const openApiDocumentSchema = z
  .object({
    openapi: z.string().describe('The OpenAPI version, 3.0.x'),
    info: z
      .object({
        title: z.string().describe("The service's name"),
        version: z.string().describe("The service's package version"),
      })
      .passthrough()
      .describe('About the service'),
    paths: z.record(z.unknown()).describe('Every operation, by path and method'),
  })
  .passthrough();
export interface OpenApiDocument extends z.output<typeof openApiDocumentSchema> {}
export const OpenApiDocumentSchema: Named<OpenApiDocument> = openApiDocumentSchema;

export const docsContract = c.router({
  openapi: {
    method: 'GET',
    path: '/openapi.json',
    responses: { 200: OpenApiDocumentSchema },
    summary: 'This interface as an OpenAPI 3 document, generated from the contract',
    description:
      'This interface as an OpenAPI 3 document, generated from the ts-rest contract; use it to generate clients in other languages.',
    metadata: { public: true },
  },
  reference: {
    method: 'GET',
    path: '/docs',
    responses: { 200: c.otherResponse({ contentType: 'text/html', body: z.string() }) },
    summary: 'A readable API reference rendered from the OpenAPI document',
    description:
      'The API reference (Swagger UI over /openapi.json) with guides on authentication, pagination, concurrency, attachments and errors.',
    metadata: { public: true },
  },
  problems: {
    method: 'GET',
    path: '/problems',
    responses: {
      200: z.object({ items: z.array(ProblemPageSchema).describe('Every problem code, ordered by status') }),
    },
    summary: 'Every problem code: what it means and what to do',
    description:
      'The catalogue of the `code` values problem bodies carry, with their status, meaning and the action a client should take.',
    metadata: { public: true },
  },
  problem: {
    method: 'GET',
    path: '/problems/:code',
    pathParams: z.object({ code: z.string().max(64).describe('A problem code, e.g. precondition_failed') }),
    responses: { 200: ProblemPageSchema, 400: ProblemSchema, 404: ProblemSchema },
    summary: "A problem code's page: what it means and what to do",
    description:
      "Every problem body's `type` is `/problems/<code>`, so it resolves here: JSON, or a page for a browser (`Accept: text/html`; `GET /problems` too). Unknown codes are 404.",
    metadata: { public: true },
  },
});
