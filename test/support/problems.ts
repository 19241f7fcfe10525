import type { Response } from 'supertest';
import { expect } from 'vitest';
import { ProblemSchema, type Problem, type ProblemCode } from '../../contract/common.js';

const PROBLEM_KEYS = ['code', 'detail', 'instance', 'requestId', 'status', 'title', 'type'];

/** Stack frames, file paths and SQL never reach a client. */
export function expectNoInternals(text: string): void {
  expect(text).not.toMatch(/\bat .+\(.*:\d+:\d+\)|node_modules|\/work\/|\.ts:\d+|\bSELECT\b|\bINSERT\b|prisma/i);
}

/** The paths of a problem's validation issues, in the order given. */
export const errorPaths = (body: unknown): string[] => (ProblemSchema.parse(body).errors ?? []).map((e) => e.path);

/**
 * Checks the RFC 9457 body every error carries, tied to the response it came in (status, media
 * type, request id), and returns it. `instance` is checked when given.
 */
export function expectProblem(
  res: Pick<Response, 'status' | 'headers' | 'body' | 'text'>,
  status: number,
  code: ProblemCode,
  instance?: string,
): Problem {
  expect(res.status).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
  const problem = ProblemSchema.strict().parse(res.body);
  expect(
    Object.keys(problem)
      .filter((k) => k !== 'errors' && k !== 'truncated')
      .sort(),
  ).toEqual(PROBLEM_KEYS);
  expect(problem).toMatchObject({ type: `/problems/${code}`, status, code });
  if (instance !== undefined) expect(problem.instance).toBe(instance);
  expect(problem.title.length).toBeGreaterThan(0);
  expect(problem.detail.length).toBeGreaterThan(0);
  expect(problem.requestId).toBe(res.headers['x-request-id']);
  expectNoInternals(res.text);
  return problem;
}
