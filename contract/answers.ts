// The two branches of an answer: a success body, or RFC 9457 problem details.
import type { Problem } from './common.js';
import { PROBLEM_CODES } from './problem-codes.js';

interface AnyAnswer {
  status: number;
  body: unknown;
  headers: Headers;
}

/** The statuses the contract declares for answers that are not errors. */
const SUCCESS_STATUSES = [200, 201, 204, 206, 304] as const;
type SuccessStatus = (typeof SUCCESS_STATUSES)[number];
export type Success<A> = Extract<A, { status: SuccessStatus }>;

/** True when the answer is an error with a problem+json body: narrows `answer.body` to `Problem`. */
export const isProblem = <A extends AnyAnswer>(answer: A): answer is A & { body: Problem } =>
  answer.status >= 400 && isProblemBody(answer.body);

/** The fields of problem details, checked by hand: no schema library in a browser bundle. */
function isProblemBody(body: unknown): boolean {
  if (typeof body !== 'object' || body === null) return false;
  const fields: Partial<Record<keyof Problem, unknown>> = body;
  const texts = [fields.type, fields.title, fields.detail, fields.instance, fields.requestId];
  return (
    texts.every((text) => typeof text === 'string') &&
    Number.isInteger(fields.status) &&
    PROBLEM_CODES.some((code) => code === fields.code) &&
    (fields.errors === undefined || Array.isArray(fields.errors))
  );
}

const isSuccess = <A extends AnyAnswer>(answer: A): answer is Success<A> =>
  SUCCESS_STATUSES.some((status) => status === answer.status);

/** An error answer, thrown by `ok()`: `problem` holds the service's problem details. */
export class ProblemError extends Error {
  override readonly name = 'ProblemError';
  readonly status: number;
  constructor(
    readonly problem: Problem,
    readonly headers: Headers,
  ) {
    super(`${problem.status} ${problem.code}: ${problem.detail}`);
    this.status = problem.status;
  }
}

/** An answer that is neither a declared success nor problem details (a proxy's HTML error page, say). */
export class UnexpectedAnswerError extends Error {
  override readonly name = 'UnexpectedAnswerError';
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {
    super(`Unexpected answer with status ${status}`);
  }
}

/**
 * The answer when it succeeded (2xx or 304), typed by its status; throws `ProblemError` for a
 * problem and `UnexpectedAnswerError` for anything else. `const task = (await ok(client.tasks.get(…))).body`.
 */
export async function ok<A extends AnyAnswer>(answer: A | Promise<A>): Promise<Success<A>> {
  const settled = await answer;
  if (isSuccess(settled)) return settled;
  throw errorOf(settled);
}

/** The error an answer that is not a success stands for: `ProblemError` for problem details, else `UnexpectedAnswerError`. */
export const errorOf = (answer: AnyAnswer): ProblemError | UnexpectedAnswerError =>
  isProblem(answer)
    ? new ProblemError(answer.body, answer.headers)
    : new UnexpectedAnswerError(answer.status, answer.body);
