// Per-request authentication with a personal access token, and the scope check every operation
// passes (called by the one authentication middleware, never by handlers).
import type { AppRoute } from '@ts-rest/core';
import { grantsScope, isLoginOnly, RoleSchema, scopeOf, type Role } from '@task-service/client';
import type { TokenRejection } from '../security/tokens.js';
import type { AppContext } from '../context.js';
import { sql } from 'kysely';
import { tables } from '../db/query.js';
import { AppError } from '../http/errors.js';
import type { Principal } from '../http/principal.js';
import { hashPersonalAccessToken, isWellFormedToken } from './format.js';
import { scopesOf } from './serialize.js';

const TOUCH_EVERY_MS = 60_000;

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
  const row = await ctx.db.sql.first(
    tables
      .selectFrom('personal_access_tokens as t')
      .innerJoin('users as u', 'u.id', 't.user_id')
      .select(['t.id', 't.user_id', 't.scopes', 't.expires_at', 't.last_used_at', 'u.role'])
      .where('t.token_hash', '=', hashPersonalAccessToken(token)),
  );
  const role = RoleSchema.safeParse(row?.role);
  if (!row || !role.success) return { rejected: 'token_unknown' };
  const now = Date.now();
  if (row.expires_at.getTime() <= now) return { rejected: 'token_expired' };
  if (row.last_used_at === null || now - row.last_used_at.getTime() >= TOUCH_EVERY_MS) {
    // At most once a minute per token; the condition keeps concurrent requests to one write.
    await ctx.db.sql.write(
      tables
        .updateTable('personal_access_tokens')
        .set({ last_used_at: sql<Date>`now()` })
        .where('id', '=', row.id)
        .where((eb) =>
          eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<=', sql<Date>`now() - interval '1 minute'`)]),
        ),
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
  if (ids.length === 0) return new Map();
  const rows = await ctx.db.sql.all(
    tables
      .selectFrom('personal_access_tokens as t')
      .innerJoin('users as u', 'u.id', 't.user_id')
      .select(['t.id', 't.scopes', 'u.role'])
      .where('t.id', 'in', [...new Set(ids)])
      .where('t.expires_at', '>', sql<Date>`now()`),
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
