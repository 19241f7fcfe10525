import { v7 as uuidv7 } from 'uuid';
import {
  MAX_LIVE_TOKENS,
  PersonalAccessTokenCreateSchema,
  type CreatedPersonalAccessToken,
  type PersonalAccessToken,
  type PersonalAccessTokenCreate,
} from '@task-service/client';
import type { AppContext } from '../context.js';
import { inTransaction } from '../db/transactions.js';
import type { PersonalAccessToken as TokenRow, Prisma } from '../generated/prisma/client.js';
import { AppError, notFound } from '../http/errors.js';
import { isAdmin, type Principal } from '../http/principal.js';
import { hashPersonalAccessToken, newPersonalAccessToken } from './format.js';
import { serializeToken } from './serialize.js';

const DAY_MS = 24 * 3600 * 1000;

/** Admins see every token, others their own; expired tokens are no longer listed or shown. */
const tokenVisibleTo = (principal: Principal, now: Date): Prisma.PersonalAccessTokenWhereInput => ({
  expiresAt: { gt: now },
  ...(isAdmin(principal) ? {} : { userId: principal.userId }),
});

export async function createToken(
  ctx: AppContext,
  principal: Principal,
  input: PersonalAccessTokenCreate,
): Promise<CreatedPersonalAccessToken> {
  const { name, scopes, expiresInDays } = PersonalAccessTokenCreateSchema.parse(input);
  if (scopes.includes('admin') && !isAdmin(principal))
    throw new AppError('forbidden', 'Only an administrator may grant the admin scope');
  const { token, prefix } = newPersonalAccessToken();
  const row = await inTransaction(ctx.db.prisma, async (tx) => {
    // The user's row lock makes the count and the insert one step for concurrent creations.
    await tx.$queryRaw`SELECT 1 FROM users WHERE id = ${principal.userId}::uuid FOR NO KEY UPDATE`;
    const now = new Date();
    const live = await tx.personalAccessToken.count({ where: { userId: principal.userId, expiresAt: { gt: now } } });
    if (live >= MAX_LIVE_TOKENS) {
      throw new AppError(
        'quota_exceeded',
        `An account holds at most ${MAX_LIVE_TOKENS} live personal access tokens: revoke one first`,
      );
    }
    return tx.personalAccessToken.create({
      data: {
        id: uuidv7(),
        userId: principal.userId,
        name,
        scopes: [...new Set(scopes)],
        tokenHash: hashPersonalAccessToken(token),
        prefix,
        createdAt: now,
        expiresAt: new Date(now.getTime() + expiresInDays * DAY_MS),
      },
    });
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
  const rows = await ctx.db.prisma.personalAccessToken.findMany({
    where: { userId: userId ?? principal.userId, expiresAt: { gt: new Date() } },
    orderBy: { id: 'desc' },
  });
  return rows.map(serializeToken);
}

/** A live token the caller may see, or 404. */
export async function findVisibleToken(ctx: AppContext, principal: Principal, tokenId: string): Promise<TokenRow> {
  const row = await ctx.db.prisma.personalAccessToken.findFirst({
    where: { AND: [{ id: tokenId }, tokenVisibleTo(principal, new Date())] },
  });
  if (!row) throw notFound('token');
  return row;
}

/** Revoking deletes the row: the next request with the token finds nothing, on every instance. */
export async function revokeToken(ctx: AppContext, principal: Principal, tokenId: string): Promise<void> {
  const token = await findVisibleToken(ctx, principal, tokenId);
  await ctx.db.prisma.personalAccessToken.deleteMany({ where: { id: token.id } });
}

/** Deletes tokens expired over a day ago (housekeeping), so the table does not grow without bound. */
export async function purgeExpiredTokens(ctx: AppContext, now = new Date()): Promise<number> {
  const { count } = await ctx.db.prisma.personalAccessToken.deleteMany({
    where: { expiresAt: { lt: new Date(now.getTime() - DAY_MS) } },
  });
  return count;
}
