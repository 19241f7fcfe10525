import { sql, type RawBuilder } from 'kysely';
import type { Config } from './config.js';
import type { AppContext } from './context.js';
import { preparedQuery, rawQuery, statementOf, tables } from './db/query.js';
import type { SqlSession, Statement } from './db/sql.js';
import { AppError } from './http/errors.js';
import { isAdmin, type Principal } from './http/principal.js';

/** What one user may hold (docs/api-guide.md, limits), each under its configuration variable. */
export type Quota = keyof Config['quotas'];

interface QuotaRule {
  variable: string;
  unit: string;
  /** The column of user_holdings that counts it. */
  column: 'tasks' | 'tags' | 'webhooks' | 'storage_bytes' | 'projects';
  /** The most one transaction adds. */
  perTransaction(config: Config): number;
}

const QUOTAS: Record<Quota, QuotaRule> = {
  tasks: { variable: 'USER_MAX_TASKS', unit: 'tasks', column: 'tasks', perTransaction: () => 1 },
  tags: { variable: 'USER_MAX_TAGS', unit: 'tags', column: 'tags', perTransaction: () => 1 },
  webhooks: { variable: 'USER_MAX_WEBHOOKS', unit: 'webhooks', column: 'webhooks', perTransaction: () => 1 },
  projects: { variable: 'USER_MAX_PROJECTS', unit: 'projects', column: 'projects', perTransaction: () => 1 },
  storageBytes: {
    variable: 'USER_STORAGE_QUOTA_BYTES',
    unit: 'bytes of attachments',
    column: 'storage_bytes',
    perTransaction: (config) => config.attachments.maxBytes,
  },
};

/** What the user holds: the sum of their holdings' slots (at most 16 rows, whatever they hold). */
async function held(db: SqlSession, userId: string, quota: Quota): Promise<bigint> {
  const row = await db.first(
    tables
      .selectFrom('user_holdings')
      // A sum of bigints is a numeric, which pg reads as text.
      .select((eb) => eb.fn.sum<string | null>(QUOTAS[quota].column).as('held'))
      .where('user_id', '=', userId),
  );
  return BigInt(row?.held ?? 0);
}

/** The most transactions the PostgreSQL server runs at once (`max_connections`), read once per service. */
const serverConnections = new WeakMap<AppContext, Promise<bigint>>();
function maxConnections(ctx: AppContext): Promise<bigint> {
  let known = serverConnections.get(ctx);
  if (!known) {
    known = ctx.db.sql
      .first(rawQuery(sql<{ max_connections: string }>`SHOW max_connections`))
      .then((row) => BigInt(row?.max_connections ?? 0));
    serverConnections.set(ctx, known);
  }
  return known;
}

/** Locks the user's row: shared far from a quota's limit, exclusive near it (see hasRoomFor). */
function userLock(userId: string, mode: 'shared' | 'exclusive') {
  const user = tables.selectFrom('users').select('id').where('id', '=', userId);
  return mode === 'shared' ? user.forShare() : user.forNoKeyUpdate();
}

const lockUserRow = (db: SqlSession, userId: string, mode: 'shared' | 'exclusive') => db.all(userLock(userId, mode));

export const quotaExceeded = (quota: Quota, limit: number) =>
  new AppError(
    'quota_exceeded',
    `Quota "${quota}" reached: an account holds at most ${limit} ${QUOTAS[quota].unit} (${QUOTAS[quota].variable})`,
  );

/**
 * Takes `claim` in the transaction `db`: locks the user's row (shared far from the limit, where one
 * user's creates need not wait for each other; exclusive near it, so that concurrent claims are
 * counted one after another and cannot pass the quota together) and tells whether the holdings
 * leave room. Rows that merely reference the user, such as the one being inserted, do not wait for
 * the lock. An exclusive claim waits for every sharer to commit, so the two modes never overlap.
 */
async function hasRoomFor(db: SqlSession, userId: string, quota: Quota, claim: QuotaClaim): Promise<boolean> {
  if (claim.kind === 'exempt') return true;
  await lockUserRow(db, userId, claim.kind);
  const { room, limit } = claimBounds(claim, 1n);
  return (await held(db, userId, quota)) + BigInt(room) <= BigInt(limit ?? 0);
}

/**
 * Runs `create` in a transaction that first claims one more of `quota` for the caller, trying the
 * claims of quotaClaims in turn. They are read before any transaction opens: a transaction waiting
 * on the pool for `max_connections` while holding a connection could starve the pool.
 */
export async function withinQuota<T>(
  ctx: AppContext,
  principal: Principal,
  quota: Quota,
  create: (tx: SqlSession) => Promise<T>,
): Promise<T> {
  for (const claim of await quotaClaims(ctx, principal, quota)) {
    const outcome = await ctx.db.sql.transaction(async (tx) =>
      (await hasRoomFor(tx, principal.userId, quota, claim)) ? { created: await create(tx) } : undefined,
    );
    if (outcome) return outcome.created;
  }
  throw quotaExceeded(quota, ctx.config.quotas[quota]);
}

/** How one more of a quota is claimed in a single statement (server/tasks/store.ts). */
export type QuotaClaim =
  { kind: 'exempt' } | { kind: 'shared'; room: bigint; limit: number } | { kind: 'exclusive'; limit: number };

/**
 * The claims to try in turn for one more of `quota`, as `withinQuota` makes them: far from the
 * limit with the user's row shared and room for every transaction in flight, then exclusively.
 * Admins are exempt.
 */
export async function quotaClaims(ctx: AppContext, principal: Principal, quota: Quota): Promise<QuotaClaim[]> {
  if (isAdmin(principal)) return [{ kind: 'exempt' }];
  const limit = ctx.config.quotas[quota];
  const margin = (await maxConnections(ctx)) * BigInt(QUOTAS[quota].perTransaction(ctx.config));
  return margin >= BigInt(limit)
    ? [{ kind: 'exclusive', limit }]
    : [
        { kind: 'shared', room: margin, limit },
        { kind: 'exclusive', limit },
      ];
}

/** The lock a claim takes on the user's row before its write: shared, exclusive, or none for the exempt. */
export const claimLock = (claim: QuotaClaim, userId: string): Statement[] =>
  claim.kind === 'exempt' ? [] : [statementOf(preparedUserLock({ userId }, claim.kind))];

/** userLock built once per mode: every create of a task, tag or project takes it. */
const preparedUserLock = preparedQuery((value: (key: 'userId') => string, mode: 'shared' | 'exclusive') =>
  userLock(value('userId'), mode),
);

/** What a claim's check must find room for, and the limit it must stay within. */
export interface ClaimBounds {
  /** A shared claim's room is for every transaction in flight. */
  room: string;
  /** Null: exempt. */
  limit: number | null;
}

export function claimBounds(claim: QuotaClaim, adding: bigint): ClaimBounds {
  if (claim.kind === 'exempt') return { room: adding.toString(), limit: null };
  return { room: (claim.kind === 'shared' ? claim.room : adding).toString(), limit: claim.limit };
}

/**
 * SQL true when the holdings of `quota` of the user `userId` leave room within `bounds` (a null
 * limit always has room). The three are values (parameters): a statement prepared once takes them
 * as stand-ins (server/db/query.ts preparedQuery).
 */
export const holdsRoom = (
  quota: Quota,
  userId: string,
  { room, limit }: { [K in keyof ClaimBounds]: ClaimBounds[K] | string },
): RawBuilder<boolean> =>
  sql<boolean>`(${limit}::bigint IS NULL OR (SELECT coalesce(sum(${sql.ref(QUOTAS[quota].column)}), 0) FROM user_holdings WHERE user_id = ${userId}) + ${room}::bigint <= ${limit}::bigint)`;

/** The claim that holds the user's row exclusively (admins are exempt): for a write that adds more than one of its quota. */
export const exclusiveClaim = (ctx: AppContext, principal: Principal, quota: Quota): QuotaClaim =>
  isAdmin(principal) ? { kind: 'exempt' } : { kind: 'exclusive', limit: ctx.config.quotas[quota] };
