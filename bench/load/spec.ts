// What the harness asks of the load generator (a child process) and what it answers, as zod
// schemas: both sides cross an IPC channel, where messages arrive as unknown.
import { z } from 'zod';

const BodySchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('json'), value: z.string() }),
  /** A multipart/form-data body with one file part named `file` of this many bytes. */
  z.object({ kind: z.literal('file'), bytes: z.number().int().positive() }),
]);
export type LoadBody = z.infer<typeof BodySchema>;

const RequestsSchema = z.discriminatedUnion('kind', [
  /** Every request takes the next path (and the next body, if any) round-robin. */
  z.object({
    kind: z.literal('rotate'),
    method: z.enum(['GET', 'POST']),
    paths: z.array(z.string()).min(1),
    bodies: z.array(BodySchema).default([]),
    headers: z.record(z.string()).default({}),
  }),
  /**
   * The load of many users: every request is sent as a user drawn at random (their headers: the
   * bearer token), for one of that user's paths drawn at random, with the next body round-robin.
   */
  z.object({
    kind: z.literal('spread'),
    method: z.enum(['GET', 'POST', 'PATCH']),
    users: z.array(z.object({ headers: z.record(z.string()), paths: z.array(z.string()).min(1) })).min(1),
    bodies: z.array(BodySchema).default([]),
  }),
  /**
   * PATCH /tasks/{id} with If-Match: a request takes a task drawn at random among those no other
   * request in flight holds, as the task's user (`user`: an index into `users`), sends its known
   * version and learns the next one from the response's ETag, so no 412 is expected.
   */
  z.object({
    kind: z.literal('patch'),
    tasks: z.array(z.object({ id: z.string(), version: z.number().int(), user: z.number().int() })).min(1),
    users: z.array(z.object({ headers: z.record(z.string()) })).min(1),
  }),
]);
export type LoadRequests = z.input<typeof RequestsSchema>;

export const LoadSpecSchema = z.object({
  url: z.string().url(),
  connections: z.number().int().positive(),
  warmupSeconds: z.number().nonnegative(),
  seconds: z.number().positive(),
  /** Requests per second over all connections; as fast as answers come when absent. */
  rate: z.number().positive().optional(),
  requests: RequestsSchema,
});
export type LoadSpec = z.input<typeof LoadSpecSchema>;

export const LoadResultSchema = z.object({
  /** Answers received in the measured window. */
  answers: z.number().int(),
  requestsPerSecond: z.number(),
  p50Ms: z.number(),
  p99Ms: z.number(),
  /** Non-2xx answers plus socket errors and timeouts. */
  errors: z.number().int(),
  /** Answers by status code, for spotting 4xx and 5xx. */
  statusCodes: z.record(z.number().int()),
  socketErrors: z.number().int(),
});
export type LoadResult = z.infer<typeof LoadResultSchema>;

export const LoadReplySchema = z.union([
  z.object({ ok: z.literal(true), result: LoadResultSchema }),
  z.object({ ok: z.literal(false), error: z.string() }),
]);
export type LoadReply = z.infer<typeof LoadReplySchema>;
