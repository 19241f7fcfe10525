// Our side of the SDK's authorization server: the OAuthServerProvider it calls for the client
// store, the authorization page, the code and refresh exchanges and revocation.
import { InvalidTokenError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import type { OAuthServerProvider } from '@modelcontextprotocol/sdk/server/auth/provider.js';
import type { AppContext } from '../context.js';
import { oauthAccessTokenCaller, revokeClientToken } from './access.js';
import { clientsStore } from './clients.js';
import { authorizationStep } from './consent.js';
import { challengeOfCode, exchangeCode, refreshGrant } from './grants.js';

export function oauthProvider(ctx: AppContext): OAuthServerProvider {
  const clients = clientsStore(ctx);
  return {
    get clientsStore() {
      return clients;
    },
    authorize: (client, params, res) => authorizationStep(ctx, client, params, res),
    challengeForAuthorizationCode: (client, code) => challengeOfCode(ctx, client.client_id, code),
    exchangeAuthorizationCode: (client, code, _verifier, redirectUri, resource) =>
      exchangeCode(ctx, client.client_id, code, redirectUri, resource),
    exchangeRefreshToken: (client, refreshToken, scopes, resource) =>
      refreshGrant(ctx, client.client_id, refreshToken, scopes, resource),
    async verifyAccessToken(token) {
      const checked = await oauthAccessTokenCaller(ctx, token, 'mcp');
      if (!('principal' in checked)) throw new InvalidTokenError('The access token is invalid, expired or revoked');
      return { token, clientId: '', scopes: checked.principal.token?.scopes ?? [] };
    },
    revokeToken: (client, request) => revokeClientToken(ctx, client.client_id, request.token),
  };
}
