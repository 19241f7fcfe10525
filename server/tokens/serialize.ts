import { ScopeSchema, type PersonalAccessToken } from '@task-service/client';
import type { PersonalAccessToken as TokenRow } from '../generated/prisma/client.js';

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
