import pg from 'pg';
import { z } from 'zod';

// PostgreSQL's error codes (SQLSTATE) the service acts on.
const UNIQUE_VIOLATION = '23505';
const FOREIGN_KEY_VIOLATION = '23503';
const SERIALIZATION_FAILURE = '40001';
const DEADLOCK_DETECTED = '40P01';

// What pg throws: the code on the error.
const PgFailure = z.object({ code: z.string().regex(/^[0-9A-Z]{5}$/) });

function postgresCode(error: unknown): string | undefined {
  if (error instanceof pg.DatabaseError) return PgFailure.safeParse(error).data?.code;
  if (!(error instanceof Error) || !(error.cause instanceof Object) || !('code' in error.cause)) return undefined;
  return typeof error.cause.code === 'string' ? error.cause.code : undefined;
}

/** A unique constraint was violated. */
export const isUniqueViolation = (error: unknown): boolean => postgresCode(error) === UNIQUE_VIOLATION;

/** A referenced row does not exist, or the row to change is gone. */
export const isMissingRow = (error: unknown): boolean => postgresCode(error) === FOREIGN_KEY_VIOLATION;

/** PostgreSQL aborted the transaction for a deadlock or a serialization failure: it may run again. */
export const isTransactionConflict = (error: unknown): boolean =>
  postgresCode(error) === SERIALIZATION_FAILURE || postgresCode(error) === DEADLOCK_DETECTED;

// Network errors, PostgreSQL connection and shutdown states.
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  // A query written to a socket the killed server had already closed.
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  '08000',
  '08001',
  '08003',
  '08006',
  '53300',
  '57P01',
  '57P02',
  '57P03',
]);
// A handle closed under a request (shutdown), or a connection that broke under it, gives plain errors:
// pg's and pg.Pool's.
const UNREACHABLE_MESSAGES =
  /connection (terminated|refused)|Can't reach database|Cannot use a pool after calling end|is not queryable|timeout exceeded when trying to connect|^timeout expired$/i;
/** The database cannot be reached (or its handle was closed): a 503, not a 500. */
export function isDatabaseUnreachable(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const code = 'code' in e ? e.code : undefined;
    if (typeof code === 'string' && UNREACHABLE_CODES.has(code)) return true;
    // A Unix socket that is gone: the server (the embedded one) stopped and removed it.
    if (code === 'ENOENT' && 'syscall' in e && e.syscall === 'connect') return true;
    if (UNREACHABLE_MESSAGES.test(e.message)) return true;
  }
  return false;
}

// 57014 query_canceled: here, the statement timeout (DATABASE_STATEMENT_TIMEOUT_MS) ran out.
const STATEMENT_TIMEOUT = /canceling statement due to statement timeout/i;
/** The database gave up on a statement that ran past the statement timeout: a 503, not a 500. */
export function isStatementTimeout(err: unknown): boolean {
  for (
    let e: unknown = err, depth = 0;
    e instanceof Object && depth < 5;
    e = 'cause' in e ? e.cause : undefined, depth++
  ) {
    const codes = ['code' in e ? e.code : undefined, 'originalCode' in e ? e.originalCode : undefined];
    if (codes.includes('57014')) return true;
    if ('message' in e && typeof e.message === 'string' && STATEMENT_TIMEOUT.test(e.message)) return true;
  }
  return false;
}

/** The constraint a failed pg statement names (23503 and 23505 name theirs). */
export const violatedConstraint = (error: unknown): string | undefined =>
  error instanceof pg.DatabaseError ? error.constraint : undefined;
