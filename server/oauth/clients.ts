// The apps that registered themselves (RFC 7591 dynamic client registration): the SDK's handler
// checks the request's shape and answers; this store decides what a redirect URI may be, keeps the
// number of clients bounded, and keeps a confidential client's secret only as its hash.
import { v7 as uuidv7 } from 'uuid';
import type { OAuthRegisteredClientsStore } from '@modelcontextprotocol/sdk/server/auth/clients.js';
import {
  InvalidClientMetadataError,
  OAuthError,
  TemporarilyUnavailableError,
} from '@modelcontextprotocol/sdk/server/auth/errors.js';
import type { OAuthClientInformationFull } from '@modelcontextprotocol/sdk/shared/auth.js';
import type { AppContext } from '../context.js';
import { tables } from '../db/query.js';
import { hashSecret } from './secrets.js';

export const MAX_REDIRECT_URIS = 10;
const MAX_TEXT = 2000;
const MAX_NAME = 200;
const UNUSED_CLIENT_MS = 30 * 24 * 3600 * 1000;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);
/** Schemes a browser runs or reads itself: never a place to send an authorization code. */
const REFUSED_SCHEMES = new Set([
  'javascript:',
  'data:',
  'vbscript:',
  'file:',
  'blob:',
  'about:',
  'ws:',
  'wss:',
  'ftp:',
]);

/** RFC 7591 §3.2.2's error for a redirect URI the server does not accept. */
export class InvalidRedirectUriError extends OAuthError {
  static override errorCode = 'invalid_redirect_uri';
}

/**
 * Why a redirect URI is refused, if it is: it must be https, http on a loopback host (any port,
 * RFC 8252 §7.3), or a private-use scheme (RFC 8252 §7.1), without a fragment.
 */
export function redirectUriRefusal(uri: string): string | undefined {
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return `${uri.slice(0, 100)} is not a URL`;
  }
  if (uri.includes('#')) return 'A redirect URI must not have a fragment';
  if (url.protocol === 'https:') return undefined;
  if (url.protocol === 'http:')
    return LOOPBACK_HOSTS.has(url.hostname)
      ? undefined
      : 'An http redirect URI must be on a loopback host (localhost, 127.0.0.1, [::1])';
  if (REFUSED_SCHEMES.has(url.protocol)) return `The ${url.protocol} scheme is not a redirect URI`;
  return undefined; // a private-use scheme (com.example.app:/callback)
}

function checkRegistration(client: Omit<OAuthClientInformationFull, 'client_id' | 'client_id_issued_at'>): void {
  const uris = client.redirect_uris;
  if (uris.length === 0 || uris.length > MAX_REDIRECT_URIS)
    throw new InvalidRedirectUriError(`Register 1 to ${MAX_REDIRECT_URIS} redirect URIs`);
  for (const uri of uris) {
    if (uri.length > MAX_TEXT) throw new InvalidRedirectUriError(`A redirect URI is at most ${MAX_TEXT} characters`);
    const refusal = redirectUriRefusal(uri);
    if (refusal) throw new InvalidRedirectUriError(refusal);
  }
  if ((client.client_name?.length ?? 0) > MAX_NAME)
    throw new InvalidClientMetadataError(`client_name is at most ${MAX_NAME} characters`);
  const grants = client.grant_types ?? ['authorization_code'];
  if (grants.some((grant) => grant !== 'authorization_code' && grant !== 'refresh_token'))
    throw new InvalidClientMetadataError('grant_types may hold only authorization_code and refresh_token');
  if ((client.response_types ?? ['code']).some((type) => type !== 'code'))
    throw new InvalidClientMetadataError('response_types may hold only code');
  if (JSON.stringify(client).length > 16 * MAX_TEXT)
    throw new InvalidClientMetadataError('The registration is too large');
}

/** What is kept of a registration: what the client sent that this server uses or answers back. */
const keptMetadata = (client: Omit<OAuthClientInformationFull, 'client_id' | 'client_id_issued_at'>) => ({
  redirect_uris: client.redirect_uris,
  client_name: client.client_name,
  grant_types: client.grant_types ?? ['authorization_code', 'refresh_token'],
  response_types: ['code'],
  // Public clients authenticate with nothing; the others send their secret in the body (the SDK's handler has no Basic).
  token_endpoint_auth_method: client.client_secret === undefined ? 'none' : 'client_secret_post',
  scope: client.scope,
  software_id: client.software_id,
  software_version: client.software_version,
});

export function clientsStore(ctx: AppContext): OAuthRegisteredClientsStore {
  return {
    async getClient(clientId) {
      if (!UUID.test(clientId)) return undefined;
      const row = await ctx.db.sql.first(
        tables
          .selectFrom('oauth_clients')
          .select(['id', 'secret_hash', 'secret_expires_at', 'metadata', 'created_at'])
          .where('id', '=', clientId),
      );
      if (!row) return undefined;
      // The SDK's schemas (zod 4) are loaded with its handlers, the only callers: not by housekeeping, which imports this file.
      const { OAuthClientInformationFullSchema } = await import('@modelcontextprotocol/sdk/shared/auth.js');
      const parsed = OAuthClientInformationFullSchema.safeParse({
        ...(typeof row.metadata === 'object' ? row.metadata : {}),
        client_id: row.id,
        client_id_issued_at: Math.floor(row.created_at.getTime() / 1000),
        // The hash: the token and revocation endpoints hash the secret a client sends before comparing (router.ts).
        ...(row.secret_hash !== null && { client_secret: row.secret_hash }),
        ...(row.secret_expires_at !== null && {
          client_secret_expires_at: Math.floor(row.secret_expires_at.getTime() / 1000),
        }),
      });
      return parsed.success ? parsed.data : undefined;
    },

    async registerClient(client) {
      checkRegistration(client);
      const metadata = keptMetadata(client);
      const id = uuidv7();
      const now = new Date();
      const max = ctx.config.oauth.maxClients;
      const registered = await ctx.db.sql.transaction(async (tx) => {
        // One registration at a time decides on the count, so the cap holds under a flood.
        await tx.exec(`SELECT pg_advisory_xact_lock(${CLIENTS_LOCK})`);
        const counted = await tx.first(
          tables.selectFrom('oauth_clients').select((eb) => eb.fn.countAll<string>().as('n')),
        );
        if (Number(counted?.n ?? 0) >= max) return false;
        await tx.write(
          tables.insertInto('oauth_clients').values({
            id,
            secret_hash: client.client_secret === undefined ? null : hashSecret(client.client_secret),
            secret_expires_at: null,
            name: client.client_name ?? '',
            redirect_uris: client.redirect_uris,
            metadata: JSON.stringify(metadata),
            created_at: now,
            last_used_at: now,
          }),
        );
        return true;
      });
      if (!registered) {
        ctx.logger.warn({ max }, 'OAuth client registration refused: OAUTH_MAX_CLIENTS reached');
        throw new TemporarilyUnavailableError('This server holds as many registered apps as it may; try again later');
      }
      return {
        ...metadata,
        client_id: id,
        client_id_issued_at: Math.floor(now.getTime() / 1000),
        ...(client.client_secret !== undefined && { client_secret: client.client_secret, client_secret_expires_at: 0 }),
      };
    },
  };
}

/** An arbitrary constant naming the registration lock (pg advisory locks take a number). */
const CLIENTS_LOCK = 0x0a07c1;

/** Removes clients unused for 30 days, with their grants (housekeeping). */
export async function purgeUnusedClients(ctx: AppContext, now = new Date()): Promise<number> {
  return ctx.db.sql.write(
    tables.deleteFrom('oauth_clients').where('last_used_at', '<', new Date(now.getTime() - UNUSED_CLIENT_MS)),
  );
}
