import { createHash } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import type { TsRestRequest } from '@ts-rest/express';
import type { AppRoute } from '@ts-rest/core';
import { z } from 'zod';
import { isLoginOnly, isPublicRoute } from '@task-service/client';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { Database } from '../db/database.js';
import { sql, type Compilable, type ExpressionBuilder } from 'kysely';
import { AnswerKeeper, keepingAnswers } from '../db/answer-keeper.js';
import { rawQuery, statementOf, tables, type DB } from '../db/query.js';
import { AppError, invalidField, problemAnswer, toAppError } from './errors.js';
import { principalOf } from './principal.js';

const KEPT_MS = 24 * 3600 * 1000;
const KEY = /^[\x20-\x7e]{1,255}$/;
/** The parts of an answer a replay repeats. */
const REPLAYED_HEADERS = ['location', 'etag', 'content-type'];

const StoredResponseSchema = z.object({ headers: z.record(z.string()), body: z.string() });

/**
 * A POST that creates something: the contract declares a 201 or 202 answer. Public ones have no
 * caller to key by; a personal access token's creation is not kept, as its answer holds the token.
 */
export const isCreatingPost = (route: AppRoute): boolean =>
  route.method === 'POST' &&
  !isPublicRoute(route) &&
  !isLoginOnly(route) &&
  ('201' in route.responses || '202' in route.responses);

// No body of the contract nests deeper; a deeper one is refused before it can exhaust the stack.
const MAX_DEPTH = 32;

/** JSON with object keys sorted, so that JSON-equal bodies hash alike. */
function canonical(value: unknown, depth = 0): string {
  if (depth > MAX_DEPTH) throw invalidField('body', 'too_deep', `The body nests deeper than ${MAX_DEPTH} levels`);
  if (Array.isArray(value)) return `[${value.map((item) => canonical(item, depth + 1)).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value).sort(([a], [b]) => (a < b ? -1 : 1));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v, depth + 1)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'undefined';
}

const fingerprintOf = (req: Request, content: unknown) =>
  createHash('sha256')
    .update(`${req.method} ${req.originalUrl}\n${canonical(content)}`)
    .digest('hex');

type Claim =
  | { kind: 'claimed' }
  | { kind: 'replay'; status: number; response: z.infer<typeof StoredResponseSchema> }
  | { kind: 'in_use' }
  | { kind: 'reused' };

/** What the keys need of the service: its database, two settings and its logger. */
export interface IdempotencyNeeds {
  db: Database;
  config: Pick<Config, 'idempotencyMaxKeysPerUser' | 'idempotencyAbandonedSeconds' | 'crashAtKeptAnswer'>;
  logger: Logger;
}

/** INSERT … ON CONFLICT DO NOTHING claims the key: of concurrent requests with one key, one runs. */
async function claim(ctx: IdempotencyNeeds, userId: string, key: string, fingerprint: string): Promise<Claim> {
  const db = ctx.db.sql;
  const now = new Date();
  // A claim with no answer this old belongs to a request that died before committing (killed, timed out).
  const abandoned = new Date(now.getTime() - ctx.config.idempotencyAbandonedSeconds * 1000);
  await db.write(
    tables
      .deleteFrom('idempotency_keys')
      .where(isKey(userId, key))
      .where((eb) =>
        eb.or([eb('expires_at', '<', now), eb.and([eb('status', 'is', null), eb('created_at', '<', abandoned)])]),
      ),
  );
  const inserted = await db.write(
    tables
      .insertInto('idempotency_keys')
      .values({ user_id: userId, key, fingerprint, created_at: now, expires_at: new Date(now.getTime() + KEPT_MS) })
      .onConflict((conflict) => conflict.columns(['user_id', 'key']).doNothing()),
  );
  if (inserted === 1) {
    await db.write(keysBeyondCap(userId, ctx.config.idempotencyMaxKeysPerUser));
    return { kind: 'claimed' };
  }
  const row = await db.first(
    tables.selectFrom('idempotency_keys').where(isKey(userId, key)).select(['fingerprint', 'status', 'response']),
  );
  if (!row) return claim(ctx, userId, key, fingerprint); // the first request failed (5xx) meanwhile
  if (row.fingerprint !== fingerprint) return { kind: 'reused' };
  if (row.status === null) return { kind: 'in_use' };
  return { kind: 'replay', status: row.status, response: StoredResponseSchema.parse(row.response) };
}

/** The caller's row for `key`. */
const isKey = (userId: string, key: string) => (eb: ExpressionBuilder<DB, 'idempotency_keys'>) =>
  eb.and([eb('user_id', '=', userId), eb('key', '=', key)]);

/**
 * Deletes a caller's keys beyond the newest `max`. Both halves run on the index on (user_id,
 * created_at, key): the newest `max` read backwards without a sort, the rest deleted as one range.
 */
export const keysBeyondCap = (userId: string, max: number): Compilable<unknown> =>
  rawQuery(sql`DELETE FROM idempotency_keys k
     USING (SELECT created_at, key FROM idempotency_keys WHERE user_id = ${userId}
            ORDER BY created_at DESC, key DESC OFFSET ${max} LIMIT 1) AS cut
     WHERE k.user_id = ${userId} AND (k.created_at, k.key) <= (cut.created_at, cut.key)`);

/** Deletes answers kept past their 24 hours, on the index on expires_at. */
export const expiredKeys = (now: Date) => tables.deleteFrom('idempotency_keys').where('expires_at', '<', now);

/** Whether the request passes its operation's schemas: one the contract refuses never started running. */
function passesContract(route: AppRoute, req: Request): boolean {
  const parts: [unknown, unknown][] = [
    ['body' in route ? route.body : undefined, req.body],
    [route.pathParams, req.params],
    [route.query, req.query],
  ];
  return parts.every(([schema, value]) => !(schema instanceof z.ZodType) || schema.safeParse(value).success);
}

let answersToKeep = 0;
/** Test only (TEST_CRASH_AT_KEPT_ANSWER): the process group dies as in a power cut, as the Nth answer is about to be kept. */
function crashIfDue(ctx: IdempotencyNeeds): void {
  if (ctx.config.crashAtKeptAnswer !== undefined && ++answersToKeep === ctx.config.crashAtKeptAnswer)
    process.kill(0, 'SIGKILL');
}

/** The statement that keeps an answer under the caller's key. */
const keptAnswer = (userId: string, key: string, status: number, response: z.infer<typeof StoredResponseSchema>) =>
  tables
    .updateTable('idempotency_keys')
    .where(isKey(userId, key))
    .set({ status, response: JSON.stringify(response) });

/** Frees the key of a request that kept no answer (a 5xx, a connection gone), so that a retry runs again. */
const releaseKey = (ctx: IdempotencyNeeds, userId: string, key: string) =>
  ctx.db.sql
    .write(tables.deleteFrom('idempotency_keys').where(isKey(userId, key)).where('status', 'is', null))
    .catch((error: unknown) => ctx.logger.warn({ err: error }, 'could not release an idempotency key'));

/**
 * Keeps a 2xx or 4xx answer before it is sent, in the transaction of the change it reports (the
 * keeper holds it open until then), so a retry right after it replays it and a crash leaves both
 * or neither. After a 5xx, or when the connection closed first, the change is rolled back and the
 * key freed, so that a retry runs again. A failed commit answers its 5xx instead.
 */
function keepAnswer(ctx: IdempotencyNeeds, req: Request, res: Response, userId: string, key: string): AnswerKeeper {
  const keeper = new AnswerKeeper();
  const send = res.send.bind(res);
  let sent = false;
  res.send = (chunk?: unknown) => {
    if (sent) return send(chunk);
    sent = true;
    const body = typeof chunk === 'string' ? chunk : Buffer.isBuffer(chunk) ? chunk.toString('utf8') : '';
    const headers = Object.fromEntries(
      REPLAYED_HEADERS.flatMap((name) => (res.hasHeader(name) ? [[name, String(res.getHeader(name))]] : [])),
    );
    const answer = res.statusCode < 500 ? keptAnswer(userId, key, res.statusCode, { headers, body }) : undefined;
    if (answer) crashIfDue(ctx);
    keeper.finish(answer && statementOf(answer)).then(
      async (outcome) => {
        // No change held: the answer (a refusal, or nothing written) is kept on its own.
        if (outcome === 'none' && answer)
          await ctx.db.sql
            .write(answer)
            .catch((error: unknown) => ctx.logger.warn({ err: error }, 'could not record an idempotent answer'));
        if (outcome === 'rolled_back' || !answer) await releaseKey(ctx, userId, key);
        send(chunk);
      },
      async (error: unknown) => {
        await releaseKey(ctx, userId, key);
        send(failedCommit(ctx, req, res, error));
      },
    );
    return res;
  };
  res.once('close', () => {
    if (sent) return;
    void keeper
      .abandon()
      .catch((error: unknown) => ctx.logger.warn({ err: error }, 'could not roll back an abandoned request'))
      .then(() => releaseKey(ctx, userId, key));
  });
  return keeper;
}

/** The answer that replaces one whose change did not commit: the commit's own failure, as a problem. */
function failedCommit(ctx: IdempotencyNeeds, req: Request, res: Response, error: unknown): string {
  ctx.logger.error({ err: error }, 'a change could not be committed with its answer');
  for (const name of REPLAYED_HEADERS) res.removeHeader(name);
  return problemAnswer(req, res, toAppError(error));
}

/**
 * Idempotency-Key on creating POSTs (draft-ietf-httpapi-idempotency-key-header): the first request
 * with a key runs and its answer is kept 24 hours per caller; the same request again gets that
 * answer with `Idempotent-Replayed: true`; another request with the key is 422, one while the
 * first still runs 409. `contentOf` says what of the request must match (default: the JSON body).
 */
export function idempotencyKeys(ctx: IdempotencyNeeds, upload?: { contentOf: (req: Request) => unknown }) {
  const contentOf = upload?.contentOf ?? ((req: Request) => req.body);
  return <R extends AppRoute>(req: TsRestRequest<R>, res: Response, next: NextFunction): void => {
    const key = req.headers['idempotency-key'];
    // An upload's body is read after the global middleware: its route checks the key once the file is in.
    const multipart = 'contentType' in req.tsRestRoute && req.tsRestRoute.contentType === 'multipart/form-data';
    if (key === undefined || !isCreatingPost(req.tsRestRoute) || multipart !== (upload !== undefined)) return next();
    if (typeof key !== 'string' || !KEY.test(key)) {
      return next(
        invalidField(
          'header.idempotency-key',
          'invalid_idempotency_key',
          'Idempotency-Key takes 1 to 255 printable ASCII characters',
        ),
      );
    }
    // As at Stripe, a request the contract refuses is not kept: its retry is validated again.
    if (!upload && !passesContract(req.tsRestRoute, req)) return next();
    const userId = principalOf(req).userId;
    let fingerprint: string;
    try {
      fingerprint = fingerprintOf(req, contentOf(req));
    } catch (error) {
      return next(error);
    }
    claim(ctx, userId, key, fingerprint).then((outcome) => {
      switch (outcome.kind) {
        case 'claimed':
          return keepingAnswers(keepAnswer(ctx, req, res, userId, key), next);
        case 'reused':
          return next(
            new AppError(
              'idempotency_key_reused',
              'This Idempotency-Key was used with a different request: use a new key for a new request',
            ),
          );
        case 'in_use':
          return next(
            new AppError(
              'idempotency_key_in_use',
              'A request with this Idempotency-Key is still running: retry after it finished',
              { headers: { 'Retry-After': '1' } },
            ),
          );
        case 'replay':
          for (const [name, value] of Object.entries(outcome.response.headers)) res.setHeader(name, value);
          res.setHeader('Idempotent-Replayed', 'true');
          res.status(outcome.status).send(outcome.response.body);
      }
    }, next);
  };
}

/** Deletes answers kept past their 24 hours (housekeeping). */
export async function purgeExpiredIdempotencyKeys(ctx: IdempotencyNeeds, now = new Date()): Promise<number> {
  return ctx.db.sql.write(expiredKeys(now));
}
