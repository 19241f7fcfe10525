// Per-request authentication with a personal access token, and the scope check every operation
// passes (called by the one authentication middleware, never by handlers).
import type { AppRoute } from '@ts-rest/core';
import { grantsScope, isLoginOnly, RoleSchema, scopeOf, type Role } from '@task-service/client';
import type { TokenRejection } from '../auth/tokens.js';
import type { AppContext } from '../context.js';
import { AppError } from '../http/errors.js';
import type { Principal } from '../http/principal.js';
import { hashPersonalAccessToken, isWellFormedToken } from './format.js';
import { scopesOf } from './serialize.js';

const TOUCH_EVERY_MS = 60_000;

interface TokenRow {
  id: string;
  user_id: string;
  scopes: string[];
  expires_at: Date;
  last_used_at: Date | null;
  role: string;
}

/**
 * The caller a personal access token stands for, looked up on every request (so a revocation or the
 * owner's deletion, which deletes the row, is honoured at once by every instance), with the owner's
 * role as it is now: an administrator's only while the token has the `admin` scope.
 */
export async function personalAccessTokenCaller(
  ctx: AppContext,
  token: string,
): Promise<{ principal: Principal } | { rejected: TokenRejection }> {
  if (!isWellFormedToken(token)) return { rejected: 'token_malformed' };
  const [row] = await ctx.db.sql.rows<TokenRow>(
    `SELECT t.id, t.user_id, t.scopes, t.expires_at, t.last_used_at, u.role
       FROM personal_access_tokens t JOIN users u ON u.id = t.user_id WHERE t.token_hash = $1`,
    [hashPersonalAccessToken(token)],
  );
  const role = RoleSchema.safeParse(row?.role);
  if (!row || !role.success) return { rejected: 'token_unknown' };
  const now = Date.now();
  if (row.expires_at.getTime() <= now) return { rejected: 'token_expired' };
  if (row.last_used_at === null || now - row.last_used_at.getTime() >= TOUCH_EVERY_MS) {
    // At most once a minute per token; the condition keeps concurrent requests to one write.
    await ctx.db.sql.rows(
      `UPDATE personal_access_tokens SET last_used_at = now() WHERE id = $1 AND (last_used_at IS NULL OR last_used_at <= now() - interval '1 minute')`,
      [row.id],
    );
  }
  const scopes = scopesOf(row.scopes);
  const admin = role.data === 'admin' && scopes.includes('admin');
  return {
    principal: {
      userId: row.user_id,
      sessionId: row.id,
      role: admin ? 'admin' : 'user',
      token: { id: row.id, scopes, ownerRole: role.data },
    },
  };
}

/** The role each live token among `ids` acts with now (admin only with the `admin` scope), for long-lived streams. */
export async function liveTokenRoles(ctx: AppContext, ids: string[]): Promise<Map<string, Role>> {
  const rows = await ctx.db.sql.rows<{ id: string; scopes: string[]; role: string }>(
    'SELECT t.id, t.scopes, u.role FROM personal_access_tokens t JOIN users u ON u.id = t.user_id WHERE t.id = ANY($1::uuid[]) AND t.expires_at > now()',
    [[...new Set(ids)]],
  );
  return new Map(rows.map((row) => [row.id, row.role === 'admin' && row.scopes.includes('admin') ? 'admin' : 'user']));
}

/** 403 with RFC 6750 §3.1's challenge naming the scope the operation needs. */
const insufficientScope = (scope: string) =>
  new AppError('insufficient_scope', `This token lacks the scope "${scope}" this operation needs`, {
    headers: {
      'WWW-Authenticate': `Bearer error="insufficient_scope", scope="${scope}", error_description="The token lacks the scope ${scope}"`,
    },
  });

/** Why the caller may not call the operation with the credential it used, or undefined when it may. */
export function scopeRefusal(principal: Principal, route: AppRoute): AppError | undefined {
  const token = principal.token;
  if (!token) return undefined; // an access token from a login carries every scope of its user
  if (isLoginOnly(route))
    return new AppError(
      'forbidden',
      'This operation needs an access token from a login, not a personal access token or an OAuth token',
    );
  const needed = scopeOf(route);
  if (!needed)
    return new AppError('forbidden', 'This operation declares no scope, so no personal access token may call it');
  if (!grantsScope(token.scopes, needed)) return insufficientScope(needed);
  if (needed === 'admin' && token.ownerRole !== 'admin') {
    return new AppError('forbidden', "The token's admin scope works only while its owner is an administrator");
  }
  return undefined;
}
