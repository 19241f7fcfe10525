import { v7 as uuidv7 } from 'uuid';
import {
  MAX_LIVE_TOKENS,
  PersonalAccessTokenCreateSchema,
  type CreatedPersonalAccessToken,
  type PersonalAccessToken,
  type PersonalAccessTokenCreate,
} from '@task-service/client';
import type { ExpressionBuilder } from 'kysely';
import type { AppContext } from '../context.js';
import { tables, type DB } from '../db/query.js';
import { AppError, notFound } from '../http/errors.js';
import { isAdmin, type Principal } from '../http/principal.js';
import { hashPersonalAccessToken, newPersonalAccessToken } from './format.js';
import { serializeToken, tokenColumns, type TokenRow } from './serialize.js';

const DAY_MS = 24 * 3600 * 1000;

/** Admins see every token, others their own; expired tokens are no longer listed or shown. */
const tokenVisibleTo = (principal: Principal, now: Date) => (eb: ExpressionBuilder<DB, 'personal_access_tokens'>) =>
  eb.and([
    eb('personal_access_tokens.expires_at', '>', now),
    ...(isAdmin(principal) ? [] : [eb('personal_access_tokens.user_id', '=', principal.userId)]),
  ]);

export async function createToken(
  ctx: AppContext,
  principal: Principal,
  input: PersonalAccessTokenCreate,
): Promise<CreatedPersonalAccessToken> {
  const { name, scopes, expiresInDays } = PersonalAccessTokenCreateSchema.parse(input);
  if (scopes.includes('admin') && !isAdmin(principal))
    throw new AppError('forbidden', 'Only an administrator may grant the admin scope');
  const { token, prefix } = newPersonalAccessToken();
  const row = await ctx.db.sql.transaction(async (tx) => {
    // The user's row lock makes the count and the insert one step for concurrent creations.
    await tx.all(
      tables.selectFrom('users').select('users.id').where('users.id', '=', principal.userId).forNoKeyUpdate(),
    );
    const now = new Date();
    const counted = await tx.first(
      tables
        .selectFrom('personal_access_tokens')
        .select((eb) => eb.fn.countAll<string>().as('live'))
        .where('personal_access_tokens.user_id', '=', principal.userId)
        .where('personal_access_tokens.expires_at', '>', now),
    );
    // count(*) is a bigint, which pg reads as text.
    if (Number(counted?.live ?? 0) >= MAX_LIVE_TOKENS) {
      throw new AppError(
        'quota_exceeded',
        `An account holds at most ${MAX_LIVE_TOKENS} live personal access tokens: revoke one first`,
      );
    }
    const created = await tx.first(
      tables
        .insertInto('personal_access_tokens')
        .values({
          id: uuidv7(),
          user_id: principal.userId,
          name,
          scopes: [...new Set(scopes)],
          token_hash: hashPersonalAccessToken(token),
          prefix,
          created_at: now,
          expires_at: new Date(now.getTime() + expiresInDays * DAY_MS),
        })
        .returning(tokenColumns),
    );
    if (!created) throw new Error('INSERT … RETURNING answered no row');
    return created;
  });
  return { ...serializeToken(row), token };
}

/** The caller's live tokens, newest first; an administrator may ask for another user's. */
export async function listTokens(
  ctx: AppContext,
  principal: Principal,
  userId: string | undefined,
): Promise<PersonalAccessToken[]> {
  if (userId !== undefined && userId !== principal.userId && !isAdmin(principal)) {
    throw new AppError('forbidden', "Only an administrator may list another user's tokens");
  }
  const rows = await ctx.db.sql.all(
    tables
      .selectFrom('personal_access_tokens')
      .select(tokenColumns)
      .where('personal_access_tokens.user_id', '=', userId ?? principal.userId)
      .where('personal_access_tokens.expires_at', '>', new Date())
      .orderBy('personal_access_tokens.id', 'desc'),
  );
  return rows.map(serializeToken);
}

/** A live token the caller may see, or 404. */
export async function findVisibleToken(ctx: AppContext, principal: Principal, tokenId: string): Promise<TokenRow> {
  const row = await ctx.db.sql.first(
    tables
      .selectFrom('personal_access_tokens')
      .select(tokenColumns)
      .where('personal_access_tokens.id', '=', tokenId)
      .where(tokenVisibleTo(principal, new Date())),
  );
  if (!row) throw notFound('token');
  return row;
}

/** Revoking deletes the row: the next request with the token finds nothing, on every instance. */
export async function revokeToken(ctx: AppContext, principal: Principal, tokenId: string): Promise<void> {
  const token = await findVisibleToken(ctx, principal, tokenId);
  await ctx.db.sql.write(tables.deleteFrom('personal_access_tokens').where('personal_access_tokens.id', '=', token.id));
}

/** Deletes tokens expired over a day ago (housekeeping), so the table does not grow without bound. */
export async function purgeExpiredTokens(ctx: AppContext, now = new Date()): Promise<number> {
  return ctx.db.sql.write(
    tables
      .deleteFrom('personal_access_tokens')
      .where('personal_access_tokens.expires_at', '<', new Date(now.getTime() - DAY_MS)),
  );
}
