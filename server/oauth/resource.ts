// Where the authorization server and the resources it issues tokens for live: everything hangs off
// PUBLIC_URL, the issuer. A token is for the whole service or for its MCP endpoint only (RFC 8707).
import type { Config } from '../config.js';
import type { RequestAudience } from '../http/principal.js';

export const MCP_PATH = '/mcp';
const PRM_PATH = '/.well-known/oauth-protected-resource';

export const issuerOf = (config: Config): string => config.publicUrl;
export const mcpResourceOf = (config: Config): string => `${config.publicUrl}${MCP_PATH}`;

/** The protected-resource metadata URL (RFC 9728) for the resource a request path belongs to. */
export const resourceMetadataUrl = (config: Config, path: string): string =>
  path === MCP_PATH ? `${config.publicUrl}${PRM_PATH}${MCP_PATH}` : `${config.publicUrl}${PRM_PATH}`;

/**
 * The audience a `resource` parameter asks for: the service (also when none is asked) or its MCP
 * endpoint; undefined for anything this server does not serve (invalid_target).
 */
export function audienceOf(config: Config, resource: URL | string | undefined): string | undefined {
  if (resource === undefined) return config.publicUrl;
  let href: string;
  try {
    href = new URL(resource).href;
  } catch {
    return undefined;
  }
  if (href.includes('#') || href.includes('?')) return undefined;
  const bare = href.replace(/\/+$/, '');
  return bare === config.publicUrl || bare === mcpResourceOf(config) ? bare : undefined;
}

/** Whether a token for `audience` may be used on a request for `requested`. */
export const audienceCovers = (config: Config, audience: string, requested: RequestAudience): boolean =>
  audience === config.publicUrl || (audience === mcpResourceOf(config) && requested === 'mcp');
