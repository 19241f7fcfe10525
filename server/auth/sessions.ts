import { v7 as uuidv7 } from 'uuid';
import { RoleSchema, type AuthResult } from '@task-service/client';
import type { AppContext } from '../context.js';
import { preparedQuery, tables } from '../db/query.js';
import type { Compilable } from 'kysely';
import type { SqlSession } from '../db/sql.js';
import { invalidToken, unauthenticated, type AppError } from '../http/errors.js';
import type { Principal } from '../http/principal.js';
import { serializeUser, userColumns, type UserRow } from '../users/serialize.js';
import {
  hashRefreshToken,
  newRefreshToken,
  type AccessClaims,
  type TokenCheck,
  type TokenRejection,
} from '../security/tokens.js';

async function authResult(
  ctx: AppContext,
  user: UserRow,
  sessionId: string,
  refreshToken: string,
): Promise<AuthResult> {
  const accessToken = await ctx.tokens.issue({ userId: user.id, sessionId, role: user.role });
  return {
    user: serializeUser(user),
    accessToken,
    refreshToken,
    tokenType: 'Bearer',
    expiresIn: ctx.tokens.ttlSeconds,
  };
}

/** A new session of the user: the statement that writes its row, and its first token pair once written. */
export function newSession(
  ctx: AppContext,
  user: UserRow,
): { insert: Compilable<unknown>; answer: () => Promise<AuthResult> } {
  const refreshToken = newRefreshToken();
  const sessionId = uuidv7();
  const now = new Date();
  const insert = tables.insertInto('sessions').values({
    id: sessionId,
    user_id: user.id,
    refresh_token_hash: hashRefreshToken(refreshToken),
    created_at: now,
    last_used_at: now,
  });
  return { insert, answer: () => authResult(ctx, user, sessionId, refreshToken) };
}

/** Opens a session for the user and returns its first token pair. */
export async function startSession(ctx: AppContext, user: UserRow): Promise<AuthResult> {
  const session = newSession(ctx, user);
  await ctx.db.sql.write(session.insert);
  return session.answer();
}

const refreshRefused = () => unauthenticated('The refresh token is invalid, expired or revoked');

/** The session a refresh token belongs to, whether it is the current token or one rotated out. */
async function sessionIdOf(tx: SqlSession, tokenHash: string): Promise<string | undefined> {
  const current = await tx.first(
    tables.selectFrom('sessions').select('id').where('refresh_token_hash', '=', tokenHash),
  );
  if (current) return current.id;
  const rotated = await tx.first(
    tables.selectFrom('rotated_refresh_tokens').select('session_id').where('token_hash', '=', tokenHash),
  );
  return rotated?.session_id;
}

type Refresh =
  { kind: 'rotated'; user: UserRow; sessionId: string } | { kind: 'refused' } | { kind: 'reuse'; sessionId: string };

/**
 * Rotates a refresh token, with the session's row locked so concurrent refreshes apply one after the
 * other. The token just rotated out still refreshes within the reuse grace (two tabs, a retried
 * request): a new pair for the same session. Later it is reuse (RFC 9700 §4.14.2): the whole session
 * is revoked, whoever holds the current token.
 */
export async function refreshSession(ctx: AppContext, refreshToken: string): Promise<AuthResult> {
  const presentedHash = hashRefreshToken(refreshToken);
  const next = newRefreshToken();
  const graceMs = ctx.config.refreshReuseGraceSeconds * 1000;
  const outcome = await ctx.db.sql.transaction(async (tx): Promise<Refresh> => {
    const sessionId = await sessionIdOf(tx, presentedHash);
    if (!sessionId) return { kind: 'refused' };
    const session = await tx.first(
      tables
        .selectFrom('sessions')
        .innerJoin('users', 'users.id', 'sessions.user_id')
        .select([
          ...userColumns,
          'sessions.refresh_token_hash as refreshTokenHash',
          'sessions.revoked_at as revokedAt',
          'sessions.last_used_at as lastUsedAt',
        ])
        .where('sessions.id', '=', sessionId)
        .forUpdate('sessions'),
    );
    const now = new Date();
    if (!session || session.revokedAt || now.getTime() - session.lastUsedAt.getTime() > ctx.config.sessionIdleMs)
      return { kind: 'refused' };
    if (session.refreshTokenHash !== presentedHash) {
      const rotated = await tx.first(
        tables.selectFrom('rotated_refresh_tokens').select('rotated_at').where('token_hash', '=', presentedHash),
      );
      if (!rotated || graceMs === 0 || now.getTime() - rotated.rotated_at.getTime() > graceMs) {
        await tx.write(tables.updateTable('sessions').set({ revoked_at: now }).where('id', '=', sessionId));
        return { kind: 'reuse', sessionId };
      }
    }
    // The current token is rotated out (by a grace refresh too: the other tab's new token gets the same grace).
    await tx.write(
      tables
        .insertInto('rotated_refresh_tokens')
        .values({ token_hash: session.refreshTokenHash, session_id: sessionId, rotated_at: now })
        .onConflict((conflict) => conflict.doNothing()),
    );
    await tx.write(
      tables
        .updateTable('sessions')
        .set({ refresh_token_hash: hashRefreshToken(next), last_used_at: now })
        .where('id', '=', sessionId),
    );
    return { kind: 'rotated', user: session, sessionId };
  });
  if (outcome.kind === 'reuse')
    ctx.logger.warn({ sessionId: outcome.sessionId }, 'refresh token reuse: session revoked');
  if (outcome.kind !== 'rotated') throw refreshRefused();
  return authResult(ctx, outcome.user, outcome.sessionId, next);
}

export async function revokeSession(ctx: AppContext, sessionId: string): Promise<void> {
  await ctx.db.sql.write(
    tables
      .updateTable('sessions')
      .set({ revoked_at: new Date() })
      .where('id', '=', sessionId)
      .where('revoked_at', 'is', null),
  );
}

/**
 * The bearer token's check (signature, algorithm, issuer, audience, type, expiry), or undefined when
 * no bearer token was sent.
 */
export async function checkBearerToken(
  ctx: AppContext,
  authorization: string | undefined,
): Promise<TokenCheck | undefined> {
  // The scheme name is case-insensitive (RFC 9110 §11.1).
  const bearer = /^Bearer(?: (.*))?$/i.exec(authorization ?? '');
  if (!bearer) return undefined;
  const token = bearer[1] ?? '';
  return /^[A-Za-z0-9_\-.]+$/.test(token) ? ctx.tokens.check(token) : { rejected: 'invalid' };
}

const TOKEN_REFUSED: Record<TokenRejection, string> = {
  expired: 'The access token has expired; refresh the session (POST /auth/refresh) and retry',
  invalid: 'The access token is malformed or not signed by this service; log in again',
  token_expired: 'The personal access token has expired; create a new one',
  token_unknown: 'The personal access token is revoked or unknown',
  token_malformed:
    'The personal access token is malformed (its checksum does not match); check that it was copied whole',
  oauth_expired: 'The OAuth access token has expired; refresh it at the token endpoint',
  oauth_unknown: 'The OAuth access token is revoked or unknown; connect the app again',
  oauth_malformed: 'The OAuth access token is malformed (its checksum does not match)',
  oauth_audience:
    'The OAuth access token was issued for another resource (the MCP endpoint only, RFC 8707); ask for a token for this one',
};

/** The role of the user of a live session (built once: every authenticated request reads it). */
const liveSessionRole = preparedQuery((value: (key: 'sessionId' | 'userId') => string) =>
  tables
    .selectFrom('sessions as s')
    .innerJoin('users as u', 'u.id', 's.user_id')
    .select('u.role')
    .where('s.id', '=', value('sessionId'))
    .where('s.user_id', '=', value('userId'))
    .where('s.revoked_at', 'is', null),
);

/**
 * The caller whose verified claims name a live session, else undefined. The session is looked up on
 * every request, so a logout is honoured at once by every instance; the role comes from the
 * database, not the token.
 */
export async function livePrincipal(ctx: AppContext, claims: AccessClaims): Promise<Principal | undefined> {
  // Every authenticated request runs this: one round trip.
  const session = await ctx.db.sql.first(liveSessionRole({ sessionId: claims.sessionId, userId: claims.userId }, ''));
  const role = RoleSchema.safeParse(session?.role);
  return role.success ? { userId: claims.userId, sessionId: claims.sessionId, role: role.data } : undefined;
}

/**
 * The 401 for a request without a live caller, saying why: no token, an expired or invalid one
 * (`rejection`), or verified `claims` whose session has ended.
 */
export function notAuthenticated(claims: AccessClaims | undefined, rejection: TokenRejection | undefined): AppError {
  if (rejection) return invalidToken(TOKEN_REFUSED[rejection]);
  if (claims) return invalidToken('The session has ended (logged out, revoked or expired); log in again');
  return unauthenticated('An access token is required: send Authorization: Bearer <token>');
}

const ENDED_SESSION_RETENTION_MS = 24 * 3600 * 1000;

/**
 * Deletes sessions that ended (revoked, or unused past the idle limit) over a day ago, with their
 * rotated refresh tokens, so the tables do not grow without bound. A token of a deleted session is
 * refused exactly as one of a revoked session.
 */
export async function purgeEndedSessions(ctx: AppContext, now = new Date()): Promise<number> {
  const revokedBefore = new Date(now.getTime() - ENDED_SESSION_RETENTION_MS);
  const unusedSince = new Date(now.getTime() - ctx.config.sessionIdleMs - ENDED_SESSION_RETENTION_MS);
  // Their rotated refresh tokens go with them (ON DELETE CASCADE).
  return ctx.db.sql.write(
    tables
      .deleteFrom('sessions')
      .where((eb) => eb.or([eb('revoked_at', '<', revokedBefore), eb('last_used_at', '<', unusedSince)])),
  );
}
