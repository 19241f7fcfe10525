import { z } from 'zod';
import { c } from './common.js';

/** The parts of an OpenAPI 3 document a client may rely on; the rest passes through. */
export const OpenApiDocumentSchema = z
  .object({
    openapi: z.string(),
    info: z.object({ title: z.string(), version: z.string() }).passthrough(),
    paths: z.record(z.unknown()),
  })
  .passthrough();
export type OpenApiDocument = z.infer<typeof OpenApiDocumentSchema>;

export const docsContract = c.router({
  openapi: {
    method: 'GET',
    path: '/openapi.json',
    responses: { 200: OpenApiDocumentSchema },
    summary: 'This interface as an OpenAPI 3 document, generated from the contract',
    metadata: { public: true },
  },
  reference: {
    method: 'GET',
    path: '/docs',
    responses: { 200: c.otherResponse({ contentType: 'text/html', body: z.string() }) },
    summary: 'A readable API reference rendered from the OpenAPI document',
    metadata: { public: true },
  },
});
