// Grants: what a user approved for an app. An authorization code (single-use, 60 s) becomes a grant
// with a rotating refresh token and short-lived access tokens, all stored only as hashes. Reuse of
// a code or of a rotated-out refresh token revokes the grant (RFC 6749 §4.1.2, RFC 9700 §4.14.2).
import { v7 as uuidv7 } from 'uuid';
import {
  InvalidGrantError,
  InvalidScopeError,
  InvalidTargetError,
} from '@modelcontextprotocol/sdk/server/auth/errors.js';
import type { OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import type { Scope } from '@task-service/client';
import type { AppContext } from '../context.js';
import { tables } from '../db/query.js';
import type { SqlSession } from '../db/sql.js';
import { scopesOf } from '../tokens/serialize.js';
import { audienceOf, mcpResourceOf } from './resource.js';
import {
  hashSecret,
  isWellFormedRefreshToken,
  newAccessToken,
  newAuthorizationCode,
  newRefreshToken,
} from './secrets.js';
import { revokeGrantNow } from '../tokens/app-grants.js';

const CODE_TTL_MS = 60_000;

export interface Approval {
  clientId: string;
  userId: string;
  redirectUri: string;
  codeChallenge: string;
  scopes: Scope[];
  /** The audience the tokens will be for (resource.ts). */
  resource: string;
}

/** Writes a code for what the user approved; the code itself goes only to the redirect URI. */
export async function issueAuthorizationCode(ctx: AppContext, approval: Approval): Promise<string> {
  const code = newAuthorizationCode();
  await ctx.db.sql.write(
    tables.insertInto('oauth_authorization_codes').values({
      code_hash: hashSecret(code),
      client_id: approval.clientId,
      user_id: approval.userId,
      redirect_uri: approval.redirectUri,
      code_challenge: approval.codeChallenge,
      scopes: approval.scopes,
      resource: approval.resource,
      expires_at: new Date(Date.now() + CODE_TTL_MS),
    }),
  );
  return code;
}

const codeRefused = () => new InvalidGrantError('The authorization code is invalid, expired or already used');

/** A code presented again: what its first use issued is revoked, since one of the two presenters is not the app. */
async function codeReplayed(ctx: AppContext, grantId: string | null): Promise<InvalidGrantError> {
  if (grantId !== null) {
    await ctx.db.sql.transaction((tx) => revokeGrantNow(tx, grantId));
    ctx.logger.warn({ grantId }, 'OAuth authorization code used twice: its grant is revoked');
  }
  return codeRefused();
}

/** The PKCE challenge the code was issued under, checked by the SDK's token handler before the exchange. */
export async function challengeOfCode(ctx: AppContext, clientId: string, code: string): Promise<string> {
  const row = await ctx.db.sql.first(
    tables
      .selectFrom('oauth_authorization_codes')
      .select(['client_id', 'code_challenge', 'expires_at', 'used_at', 'grant_id'])
      .where('code_hash', '=', hashSecret(code)),
  );
  if (!row || row.client_id !== clientId) throw codeRefused();
  if (row.used_at !== null) throw await codeReplayed(ctx, row.grant_id);
  if (row.expires_at.getTime() <= Date.now()) throw codeRefused();
  return row.code_challenge;
}

/** The scopes a user may hold now: `admin` only while an administrator. */
const scopesFor = (role: string, scopes: readonly string[]): Scope[] =>
  scopesOf(scopes).filter((scope) => scope !== 'admin' || role === 'admin');

/** Writes an access token for the grant and answers the token response. */
async function tokenAnswer(
  ctx: AppContext,
  tx: SqlSession,
  grant: { id: string; clientId: string; scopes: Scope[]; resource: string },
  refreshToken: string,
  now: Date,
): Promise<OAuthTokens> {
  const accessToken = newAccessToken();
  await tx.write(
    tables.insertInto('oauth_access_tokens').values({
      token_hash: hashSecret(accessToken),
      grant_id: grant.id,
      scopes: grant.scopes,
      resource: grant.resource,
      expires_at: new Date(now.getTime() + ctx.tokens.ttlSeconds * 1000),
    }),
  );
  await tx.write(tables.updateTable('oauth_clients').set({ last_used_at: now }).where('id', '=', grant.clientId));
  return {
    access_token: accessToken,
    token_type: 'Bearer',
    expires_in: ctx.tokens.ttlSeconds,
    refresh_token: refreshToken,
    scope: grant.scopes.join(' '),
  };
}

type Exchange =
  | { kind: 'issued'; tokens: OAuthTokens }
  | { kind: 'refused'; error: Error }
  | { kind: 'replayed'; grantId: string | null };

/** Exchanges a code (its PKCE verifier already checked) for a new grant's first tokens. */
export async function exchangeCode(
  ctx: AppContext,
  clientId: string,
  code: string,
  redirectUri: string | undefined,
  resource: URL | undefined,
): Promise<OAuthTokens> {
  const outcome = await ctx.db.sql.transaction(async (tx): Promise<Exchange> => {
    const row = await tx.first(
      tables
        .selectFrom('oauth_authorization_codes')
        .innerJoin('users', 'users.id', 'oauth_authorization_codes.user_id')
        .selectAll('oauth_authorization_codes')
        .select('users.role')
        .where('code_hash', '=', hashSecret(code))
        .forUpdate('oauth_authorization_codes'),
    );
    if (!row || row.client_id !== clientId) return { kind: 'refused', error: codeRefused() };
    if (row.used_at !== null) {
      if (row.grant_id !== null) await revokeGrantNow(tx, row.grant_id);
      return { kind: 'replayed', grantId: row.grant_id };
    }
    const now = new Date();
    if (row.expires_at.getTime() <= now.getTime()) return { kind: 'refused', error: codeRefused() };
    if (redirectUri !== undefined && redirectUri !== row.redirect_uri)
      return { kind: 'refused', error: new InvalidGrantError('redirect_uri is not the one the code was issued for') };
    if (resource !== undefined && audienceOf(ctx.config, resource) !== row.resource)
      return { kind: 'refused', error: new InvalidTargetError('resource is not the one the code was issued for') };
    const grant = { id: uuidv7(), clientId, scopes: scopesFor(row.role, row.scopes), resource: row.resource };
    const refreshToken = newRefreshToken();
    await tx.write(
      tables.insertInto('oauth_grants').values({
        id: grant.id,
        user_id: row.user_id,
        client_id: clientId,
        scopes: grant.scopes,
        resource: grant.resource,
        refresh_token_hash: hashSecret(refreshToken),
        created_at: now,
        last_used_at: now,
      }),
    );
    await tx.write(
      tables
        .updateTable('oauth_authorization_codes')
        .set({ used_at: now, grant_id: grant.id })
        .where('code_hash', '=', row.code_hash),
    );
    return { kind: 'issued', tokens: await tokenAnswer(ctx, tx, grant, refreshToken, now) };
  });
  if (outcome.kind === 'issued') return outcome.tokens;
  if (outcome.kind === 'replayed') {
    ctx.logger.warn({ grantId: outcome.grantId }, 'OAuth authorization code used twice: its grant is revoked');
    throw codeRefused();
  }
  throw outcome.error;
}

const refreshRefused = () => new InvalidGrantError('The refresh token is invalid, expired or revoked');

/** The grant a refresh token belongs to, whether it is the current token or one rotated out. */
async function grantIdOf(tx: SqlSession, tokenHash: string): Promise<string | undefined> {
  const current = await tx.first(
    tables.selectFrom('oauth_grants').select('id').where('refresh_token_hash', '=', tokenHash),
  );
  if (current) return current.id;
  const rotated = await tx.first(
    tables.selectFrom('oauth_rotated_refresh_tokens').select('grant_id').where('token_hash', '=', tokenHash),
  );
  return rotated?.grant_id;
}

type Refresh =
  { kind: 'issued'; tokens: OAuthTokens } | { kind: 'refused'; error: Error } | { kind: 'reuse'; grantId: string };

/**
 * Rotates a grant's refresh token, as sessions do: the token just rotated out still refreshes within
 * the reuse grace (a retried request); later it is reuse, and the whole grant is revoked. A refresh
 * may ask for fewer scopes, or for the MCP endpoint only when the grant is for the whole service.
 */
export async function refreshGrant(
  ctx: AppContext,
  clientId: string,
  refreshToken: string,
  scopes: string[] | undefined,
  resource: URL | undefined,
): Promise<OAuthTokens> {
  if (!isWellFormedRefreshToken(refreshToken)) throw refreshRefused();
  const presented = hashSecret(refreshToken);
  const graceMs = ctx.config.refreshReuseGraceSeconds * 1000;
  const outcome = await ctx.db.sql.transaction(async (tx): Promise<Refresh> => {
    const grantId = await grantIdOf(tx, presented);
    if (!grantId) return { kind: 'refused', error: refreshRefused() };
    const grant = await tx.first(
      tables
        .selectFrom('oauth_grants')
        .innerJoin('users', 'users.id', 'oauth_grants.user_id')
        .selectAll('oauth_grants')
        .select('users.role')
        .where('oauth_grants.id', '=', grantId)
        .forUpdate('oauth_grants'),
    );
    const now = new Date();
    if (
      !grant ||
      grant.client_id !== clientId ||
      grant.revoked_at !== null ||
      now.getTime() - grant.last_used_at.getTime() > ctx.config.sessionIdleMs
    )
      return { kind: 'refused', error: refreshRefused() };
    if (grant.refresh_token_hash !== presented) {
      const rotated = await tx.first(
        tables.selectFrom('oauth_rotated_refresh_tokens').select('rotated_at').where('token_hash', '=', presented),
      );
      if (!rotated || graceMs === 0 || now.getTime() - rotated.rotated_at.getTime() > graceMs) {
        await revokeGrantNow(tx, grantId);
        return { kind: 'reuse', grantId };
      }
    }
    const held = scopesFor(grant.role, grant.scopes);
    const asked = scopes?.filter((scope) => scope !== '');
    if (asked !== undefined && asked.some((scope) => !held.some((mine) => mine === scope)))
      return { kind: 'refused', error: new InvalidScopeError('A refresh may ask only for scopes the grant holds') };
    const audience = resource === undefined ? grant.resource : audienceOf(ctx.config, resource);
    if (
      audience !== grant.resource &&
      !(grant.resource === ctx.config.publicUrl && audience === mcpResourceOf(ctx.config))
    )
      return { kind: 'refused', error: new InvalidTargetError('resource is not one the grant is for') };
    const next = newRefreshToken();
    await tx.write(
      tables
        .insertInto('oauth_rotated_refresh_tokens')
        .values({ token_hash: grant.refresh_token_hash, grant_id: grantId, rotated_at: now })
        .onConflict((conflict) => conflict.doNothing()),
    );
    await tx.write(
      tables
        .updateTable('oauth_grants')
        .set({ refresh_token_hash: hashSecret(next), last_used_at: now })
        .where('id', '=', grantId),
    );
    const issued = {
      id: grantId,
      clientId,
      scopes: asked && asked.length > 0 ? scopesOf(asked) : held,
      resource: audience,
    };
    return { kind: 'issued', tokens: await tokenAnswer(ctx, tx, issued, next, now) };
  });
  if (outcome.kind === 'issued') return outcome.tokens;
  if (outcome.kind === 'reuse') {
    ctx.logger.warn({ grantId: outcome.grantId }, 'OAuth refresh token reuse: grant revoked');
    throw refreshRefused();
  }
  throw outcome.error;
}
