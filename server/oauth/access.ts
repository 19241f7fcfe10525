// Using a grant: its access tokens authenticate requests (looked up on every request, so a revoked
// grant is refused at once by every instance), the app revokes its tokens (RFC 7009), and the user
// lists and revokes the apps they connected.
import { RoleSchema, type OAuthGrant } from '@task-service/client';
import type { AppContext } from '../context.js';
import { tables } from '../db/query.js';
import type { TokenRejection } from '../security/tokens.js';
import { notFound } from '../http/errors.js';
import type { Principal } from '../http/principal.js';
import { scopesOf } from '../tokens/serialize.js';
import { revokeGrantNow } from '../tokens/app-grants.js';
import type { RequestAudience } from '../http/principal.js';
import { audienceCovers } from './resource.js';
import { hashSecret, isWellFormedAccessToken, REFRESH_TOKEN_PREFIX } from './secrets.js';

const TOUCH_EVERY_MS = 60_000;
const DAY_MS = 24 * 3600 * 1000;

/** The caller an OAuth access token stands for, if it is live and for this request's audience. */
export async function oauthAccessTokenCaller(
  ctx: AppContext,
  token: string,
  audience: RequestAudience,
): Promise<{ principal: Principal } | { rejected: TokenRejection }> {
  if (!isWellFormedAccessToken(token)) return { rejected: 'oauth_malformed' };
  const row = await ctx.db.sql.first(
    tables
      .selectFrom('oauth_access_tokens as t')
      .innerJoin('oauth_grants as g', 'g.id', 't.grant_id')
      .innerJoin('users as u', 'u.id', 'g.user_id')
      .select(['t.scopes', 't.resource', 't.expires_at', 'g.id', 'g.user_id', 'g.last_used_at', 'u.role'])
      .where('t.token_hash', '=', hashSecret(token))
      .where('g.revoked_at', 'is', null),
  );
  const role = RoleSchema.safeParse(row?.role);
  if (!row || !role.success) return { rejected: 'oauth_unknown' };
  const now = Date.now();
  if (row.expires_at.getTime() <= now) return { rejected: 'oauth_expired' };
  if (!audienceCovers(ctx.config, row.resource, audience)) return { rejected: 'oauth_audience' };
  if (now - row.last_used_at.getTime() >= TOUCH_EVERY_MS) {
    // At most once a minute per grant; the condition keeps concurrent requests to one write.
    await ctx.db.sql.write(
      tables
        .updateTable('oauth_grants')
        .set({ last_used_at: new Date(now) })
        .where('id', '=', row.id)
        .where('last_used_at', '<=', new Date(now - TOUCH_EVERY_MS)),
    );
  }
  const scopes = scopesOf(row.scopes);
  return {
    principal: {
      userId: row.user_id,
      sessionId: row.id,
      role: role.data === 'admin' && scopes.includes('admin') ? 'admin' : 'user',
      token: { id: row.id, scopes, ownerRole: role.data },
    },
  };
}

/** RFC 7009: an app revokes one of its tokens; a refresh token takes its whole grant with it. Unknown tokens are ignored. */
export async function revokeClientToken(ctx: AppContext, clientId: string, token: string): Promise<void> {
  const hash = hashSecret(token);
  const ofClient = tables.selectFrom('oauth_grants').select('id').where('client_id', '=', clientId);
  if (token.startsWith(REFRESH_TOKEN_PREFIX)) {
    const grant =
      (await ctx.db.sql.first(ofClient.where('refresh_token_hash', '=', hash))) ??
      (await ctx.db.sql.first(
        ofClient.where(
          'id',
          'in',
          tables.selectFrom('oauth_rotated_refresh_tokens').select('grant_id').where('token_hash', '=', hash),
        ),
      ));
    if (grant) await ctx.db.sql.transaction((tx) => revokeGrantNow(tx, grant.id));
    return;
  }
  await ctx.db.sql.write(
    tables.deleteFrom('oauth_access_tokens').where('token_hash', '=', hash).where('grant_id', 'in', ofClient),
  );
}

/** The user's live grants (not revoked, used within the idle limit), newest first. */
export async function listGrants(ctx: AppContext, principal: Principal): Promise<OAuthGrant[]> {
  const rows = await ctx.db.sql.all(
    tables
      .selectFrom('oauth_grants as g')
      .innerJoin('oauth_clients as c', 'c.id', 'g.client_id')
      .select(['g.id', 'g.client_id', 'c.name', 'g.scopes', 'g.resource', 'g.created_at', 'g.last_used_at'])
      .where('g.user_id', '=', principal.userId)
      .where('g.revoked_at', 'is', null)
      .where('g.last_used_at', '>', new Date(Date.now() - ctx.config.sessionIdleMs))
      .orderBy('g.id', 'desc'),
  );
  return rows.map((row) => ({
    id: row.id,
    clientId: row.client_id,
    clientName: row.name,
    scopes: scopesOf(row.scopes),
    resource: row.resource,
    createdAt: row.created_at.toISOString(),
    lastUsedAt: row.last_used_at.toISOString(),
  }));
}

/** Revokes one of the user's grants: every token of it is refused from now on, open streams included. */
export async function revokeGrant(ctx: AppContext, principal: Principal, grantId: string): Promise<void> {
  const grant = await ctx.db.sql.first(
    tables
      .selectFrom('oauth_grants')
      .select('id')
      .where('id', '=', grantId)
      .where('user_id', '=', principal.userId)
      .where('revoked_at', 'is', null),
  );
  if (!grant) throw notFound('grant');
  await ctx.db.sql.transaction((tx) => revokeGrantNow(tx, grant.id));
}

/** Housekeeping: expired codes and access tokens, and grants ended over a day ago. */
export async function purgeEndedGrants(ctx: AppContext, now = new Date()): Promise<number> {
  const dayAgo = new Date(now.getTime() - DAY_MS);
  await ctx.db.sql.write(tables.deleteFrom('oauth_authorization_codes').where('expires_at', '<', dayAgo));
  await ctx.db.sql.write(tables.deleteFrom('oauth_access_tokens').where('expires_at', '<', now));
  return ctx.db.sql.write(
    tables
      .deleteFrom('oauth_grants')
      .where((eb) =>
        eb.or([
          eb('revoked_at', '<', dayAgo),
          eb('last_used_at', '<', new Date(now.getTime() - ctx.config.sessionIdleMs - DAY_MS)),
        ]),
      ),
  );
}
