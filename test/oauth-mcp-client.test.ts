// The whole journey of a chat app's MCP client, played by the MCP SDK's own client
// (StreamableHTTPClientTransport with an authProvider): knowing only the endpoint's URL it is
// refused, discovers the metadata, registers itself, sends the user to the authorization page
// (driven over HTTP as a browser would), exchanges the code, lists and calls tools, refreshes an
// access token the server refused, and is refused for good once the user disconnects it.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { UnauthorizedError, type OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens,
} from '@modelcontextprotocol/sdk/shared/auth.js';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { BrowserLike, oauthServiceForFile, redirectedTo } from './support/oauth.js';
import { registerUser } from './support/users.js';

const served = oauthServiceForFile();

/** What a chat app keeps for one MCP server: its registration, its tokens, the PKCE verifier, where it sent the user. */
class AppMemory implements OAuthClientProvider {
  client: OAuthClientInformationMixed | undefined;
  saved: OAuthTokens[] = [];
  verifier = '';
  sentTo: URL | undefined;
  readonly redirectUrl = 'http://127.0.0.1:9/oauth/callback';
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: 'SDK test app',
      redirect_uris: [this.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  clientInformation() {
    return this.client;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.client = info;
  }
  tokens() {
    return this.saved.at(-1);
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved.push(tokens);
  }
  redirectToAuthorization(url: URL) {
    this.sentTo = url;
  }
  /** What a client does when the server refuses what it holds (an invalid_grant on refresh: the tokens). */
  invalidateCredentials(scope: 'all' | 'client' | 'tokens' | 'verifier' | 'discovery') {
    if (scope === 'all' || scope === 'tokens') this.saved = [];
    if (scope === 'all' || scope === 'client') this.client = undefined;
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
}

const endpoint = () => new URL(`${served.baseUrl}/mcp`);

async function connected(app: AppMemory): Promise<Client> {
  const client = new Client({ name: 'sdk-test-app', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(endpoint(), { authProvider: app }));
  return client;
}

describe('an MCP client that knows only the URL', () => {
  it(
    'discovers, registers, signs in, consents, uses tools, refreshes, and is refused after the user revokes',
    { timeout: 60_000 },
    async () => {
      const user = await registerUser(served.service);
      const app = new AppMemory();

      // 1. Refused, the client discovers the server and registers; the user is to be sent to sign in.
      const transport = new StreamableHTTPClientTransport(endpoint(), { authProvider: app });
      await expect(new Client({ name: 'sdk-test-app', version: '1.0.0' }).connect(transport)).rejects.toThrow(
        UnauthorizedError,
      );
      expect(app.client?.client_id).toEqual(expect.any(String));
      const sentTo = app.sentTo;
      if (!sentTo) throw new Error('the client sent the user nowhere');
      expect(sentTo.origin + sentTo.pathname).toBe(`${served.baseUrl}/oauth/authorize`);
      expect(sentTo.searchParams.get('code_challenge_method')).toBe('S256');
      expect(sentTo.searchParams.get('resource')).toBe(`${served.baseUrl}/mcp`);

      // 2. The user signs in and allows; the app gets the code at its redirect URI and exchanges it.
      const { consent, answer } = await new BrowserLike(served.baseUrl).authorize(sentTo.href, user);
      expect(consent).toContain('SDK test app');
      const back = redirectedTo(answer);
      expect(back.searchParams.get('iss')).toBe(served.baseUrl);
      await transport.finishAuth(back.searchParams.get('code') ?? '');
      expect(app.saved).toHaveLength(1);
      const first = app.saved[0];
      expect(first?.scope?.split(' ')).not.toContain('admin');

      // 3. Tools, listed and called with the token (audience /mcp: the tool's REST call is let through).
      const client = await connected(app);
      const names = (await client.listTools()).tools.map((tool) => tool.name);
      expect(names).toEqual(expect.arrayContaining(['tasks_create', 'tasks_list']));
      expect(names).not.toContain('users_create');
      const created = await client.callTool({ name: 'tasks_create', arguments: { title: 'Written by an MCP app' } });
      expect(created.isError).toBeFalsy();
      const task = z.object({ id: z.string(), title: z.string() }).parse(created.structuredContent);
      expect(task.title).toBe('Written by an MCP app');
      // The same token on the REST interface is refused: it was issued for /mcp.
      const rest = await served.service.http.get('/tasks').set('Authorization', `Bearer ${first?.access_token}`);
      expect(rest.status).toBe(401);

      // 4. The server refuses the access token (as when it has expired): the client refreshes and retries.
      app.saved.push({ ...(first ?? { token_type: 'Bearer', access_token: '' }), access_token: 'tsk_oat_expired' });
      const listed = await client.callTool({ name: 'tasks_list', arguments: {} });
      expect(listed.isError).toBeFalsy();
      expect(JSON.stringify(listed.structuredContent)).toContain(task.id);
      const refreshed = app.saved.at(-1);
      expect(refreshed?.refresh_token).toEqual(expect.any(String));
      expect(refreshed?.refresh_token).not.toBe(first?.refresh_token);
      await client.close();

      // 5. The user disconnects the app: its next request is refused and it has to ask the user again.
      const grants = await served.service.http.get('/oauth/grants').set('Authorization', user.auth).expect(200);
      expect(grants.body.items).toEqual([
        expect.objectContaining({ clientName: 'SDK test app', resource: `${served.baseUrl}/mcp` }),
      ]);
      await served.service.http
        .delete(`/oauth/grants/${grants.body.items[0].id}`)
        .set('Authorization', user.auth)
        .expect(204);
      app.sentTo = undefined;
      await expect(connected(app)).rejects.toThrow(UnauthorizedError);
      expect(app.sentTo).toBeDefined();
    },
  );
});
