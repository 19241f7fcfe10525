import { ScopeSchema, type PersonalAccessToken } from '@task-service/client';
import type { Selection } from 'kysely';
import type { DB } from '../db/query.js';

/** The columns a PersonalAccessToken is made of (never its hash), and whose it is. */
export const tokenColumns = [
  'personal_access_tokens.id',
  'personal_access_tokens.user_id as userId',
  'personal_access_tokens.name',
  'personal_access_tokens.scopes',
  'personal_access_tokens.prefix',
  'personal_access_tokens.created_at as createdAt',
  'personal_access_tokens.expires_at as expiresAt',
  'personal_access_tokens.last_used_at as lastUsedAt',
] as const;

export type TokenRow = Selection<DB, 'personal_access_tokens', (typeof tokenColumns)[number]>;

/** Scopes as stored; one no longer known (never written by this version) is left out. */
export const scopesOf = (stored: readonly string[]) =>
  stored.flatMap((scope) => {
    const parsed = ScopeSchema.safeParse(scope);
    return parsed.success ? [parsed.data] : [];
  });

export const serializeToken = (row: TokenRow): PersonalAccessToken => ({
  id: row.id,
  name: row.name,
  scopes: scopesOf(row.scopes),
  prefix: row.prefix,
  createdAt: row.createdAt.toISOString(),
  expiresAt: row.expiresAt.toISOString(),
  lastUsedAt: row.lastUsedAt?.toISOString() ?? null,
});
