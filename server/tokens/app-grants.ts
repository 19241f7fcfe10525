// The grants apps hold through OAuth, as the layers below the OAuth server need them: revoking
// them (a password change, a replayed code, the user's own revocation) and the role a live one
// acts with (event streams). The authorization server itself is in server/oauth/.
import type { Role } from '@task-service/client';
import type { AppContext } from '../context.js';
import { tables } from '../db/query.js';
import type { SqlSession } from '../db/sql.js';

/** Revokes a grant and every access token it issued, at once on every instance. */
export async function revokeGrantNow(db: SqlSession, grantId: string): Promise<void> {
  await db.write(
    tables
      .updateTable('oauth_grants')
      .set({ revoked_at: new Date() })
      .where('id', '=', grantId)
      .where('revoked_at', 'is', null),
  );
  await db.write(tables.deleteFrom('oauth_access_tokens').where('grant_id', '=', grantId));
}

/** Revokes every grant of the user (a password change). */
export async function revokeUserGrants(ctx: AppContext, userId: string): Promise<void> {
  const live = tables
    .selectFrom('oauth_grants')
    .select('id')
    .where('user_id', '=', userId)
    .where('revoked_at', 'is', null);
  await ctx.db.sql.transaction(async (tx) => {
    for (const grant of await tx.all(live)) await revokeGrantNow(tx, grant.id);
  });
}

/** The role each live grant among `ids` acts with now (admin only with the `admin` scope), for long-lived streams. */
export async function liveGrantRoles(ctx: AppContext, ids: string[]): Promise<Map<string, Role>> {
  if (ids.length === 0) return new Map();
  const rows = await ctx.db.sql.all(
    tables
      .selectFrom('oauth_grants as g')
      .innerJoin('users as u', 'u.id', 'g.user_id')
      .select(['g.id', 'g.scopes', 'u.role'])
      .where('g.id', 'in', [...new Set(ids)])
      .where('g.revoked_at', 'is', null),
  );
  return new Map(rows.map((row) => [row.id, row.role === 'admin' && row.scopes.includes('admin') ? 'admin' : 'user']));
}
