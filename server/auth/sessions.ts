import { v7 as uuidv7 } from 'uuid';
import type { AuthResult } from '../../contract/auth.js';
import type { AppContext } from '../context.js';
import type { User as UserRow } from '../generated/prisma/client.js';
import { unauthenticated } from '../http/errors.js';
import type { Principal } from '../http/principal.js';
import { serializeUser } from '../users/serialize.js';
import { hashRefreshToken, newRefreshToken, type AccessClaims } from './tokens.js';

async function authResult(ctx: AppContext, user: UserRow, sessionId: string, refreshToken: string): Promise<AuthResult> {
  const accessToken = await ctx.tokens.issue({ userId: user.id, sessionId, role: user.role });
  return { user: serializeUser(user), accessToken, refreshToken, tokenType: 'Bearer', expiresIn: ctx.tokens.ttlSeconds };
}

/** Opens a session for the user and returns its first token pair. */
export async function startSession(ctx: AppContext, user: UserRow): Promise<AuthResult> {
  const refreshToken = newRefreshToken();
  const now = new Date();
  const session = await ctx.db.prisma.session.create({
    data: { id: uuidv7(), userId: user.id, refreshTokenHash: hashRefreshToken(refreshToken), createdAt: now, lastUsedAt: now },
  });
  return authResult(ctx, user, session.id, refreshToken);
}

/**
 * Rotates a refresh token. A token that was already rotated out is reuse (RFC 9700 §4.14.2):
 * it revokes the whole session, whoever holds the current token.
 */
export async function refreshSession(ctx: AppContext, refreshToken: string): Promise<AuthResult> {
  const { prisma } = ctx.db;
  const presentedHash = hashRefreshToken(refreshToken);
  const session = await prisma.session.findUnique({ where: { refreshTokenHash: presentedHash }, include: { user: true } });
  if (!session) {
    const rotated = await prisma.rotatedRefreshToken.findUnique({ where: { tokenHash: presentedHash } });
    if (rotated) {
      await revokeSession(ctx, rotated.sessionId);
      ctx.logger.warn({ sessionId: rotated.sessionId }, 'refresh token reuse: session revoked');
    }
    throw unauthenticated('The refresh token is invalid, expired or revoked');
  }
  const now = new Date();
  if (session.revokedAt || now.getTime() - session.lastUsedAt.getTime() > ctx.config.sessionIdleMs) {
    throw unauthenticated('The refresh token is invalid, expired or revoked');
  }
  const next = newRefreshToken();
  // Conditional on the presented hash: of two concurrent refreshes with one token, one wins and
  // the other is treated as reuse.
  const [rotated] = await prisma.$transaction([
    prisma.session.updateMany({
      where: { id: session.id, refreshTokenHash: presentedHash, revokedAt: null },
      data: { refreshTokenHash: hashRefreshToken(next), lastUsedAt: now },
    }),
    prisma.rotatedRefreshToken.createMany({ data: [{ tokenHash: presentedHash, sessionId: session.id, rotatedAt: now }], skipDuplicates: true }),
  ]);
  if (rotated.count !== 1) {
    await revokeSession(ctx, session.id);
    throw unauthenticated('The refresh token is invalid, expired or revoked');
  }
  return authResult(ctx, session.user, session.id, next);
}

export async function revokeSession(ctx: AppContext, sessionId: string): Promise<void> {
  await ctx.db.prisma.session.updateMany({ where: { id: sessionId, revokedAt: null }, data: { revokedAt: new Date() } });
}

/** Revokes every live session of the user except `keepSessionId`. */
export async function revokeOtherSessions(ctx: AppContext, userId: string, keepSessionId: string | undefined): Promise<void> {
  await ctx.db.prisma.session.updateMany({
    where: { userId, revokedAt: null, ...(keepSessionId ? { id: { not: keepSessionId } } : {}) },
    data: { revokedAt: new Date() },
  });
}

/** The verified claims of a bearer token (signature, algorithm, issuer, audience, type, expiry), if any. */
export async function accessClaimsOf(ctx: AppContext, authorization: string | undefined): Promise<AccessClaims | undefined> {
  // The scheme name is case-insensitive (RFC 9110 §11.1).
  const match = /^Bearer ([A-Za-z0-9_\-.]+)$/i.exec(authorization ?? '');
  return match?.[1] ? ctx.tokens.verify(match[1]) : undefined;
}

export const TOKEN_REQUIRED = 'A valid access token is required';
export const SESSION_ENDED = 'The session has ended';

/**
 * The caller whose verified claims name a live session, else undefined. The session is looked up on
 * every request, so a logout is honoured at once by every instance; the role comes from the
 * database, not the token.
 */
export async function livePrincipal(ctx: AppContext, claims: AccessClaims): Promise<Principal | undefined> {
  const session = await ctx.db.prisma.session.findUnique({
    where: { id: claims.sessionId },
    select: { userId: true, revokedAt: true, user: { select: { role: true } } },
  });
  if (!session || session.revokedAt || session.userId !== claims.userId) return undefined;
  return { userId: claims.userId, sessionId: claims.sessionId, role: session.user.role };
}

/** Resolves verified claims to the caller, or 401 saying why not. */
export async function principalFor(ctx: AppContext, claims: AccessClaims | undefined): Promise<Principal> {
  if (!claims) throw unauthenticated(TOKEN_REQUIRED);
  const principal = await livePrincipal(ctx, claims);
  if (!principal) throw unauthenticated(SESSION_ENDED);
  return principal;
}

const ENDED_SESSION_RETENTION_MS = 24 * 3600 * 1000;

/**
 * Deletes sessions that ended (revoked, or unused past the idle limit) over a day ago, with their
 * rotated refresh tokens, so the tables do not grow without bound. A token of a deleted session is
 * refused exactly as one of a revoked session.
 */
export async function purgeEndedSessions(ctx: AppContext, now = new Date()): Promise<number> {
  const { count } = await ctx.db.prisma.session.deleteMany({
    where: {
      OR: [
        { revokedAt: { lt: new Date(now.getTime() - ENDED_SESSION_RETENTION_MS) } },
        { lastUsedAt: { lt: new Date(now.getTime() - ctx.config.sessionIdleMs - ENDED_SESSION_RETENTION_MS) } },
      ],
    },
  });
  return count;
}
