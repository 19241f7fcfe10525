// A tool call reaches its REST operation as a request to this very server carrying the MCP
// request's own token. A token issued for the MCP endpoint only (RFC 8707) must hold there and
// nowhere else, so the call carries a proof that it comes from this endpoint: an HMAC of the
// token under a key derived from the signing key, which every instance shares (a call may land on
// another worker), and which a client can neither see nor forge.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { derivedSecret, type SigningKey } from '../security/keys.js';
import type { AudienceOf } from '../http/principal.js';

export const TOOL_CALL_HEADER = 'x-mcp-tool-call';
const MCP_PATH = '/mcp';

const keys = new WeakMap<SigningKey, Promise<Uint8Array>>();
function keyOf(signingKey: SigningKey): Promise<Uint8Array> {
  let key = keys.get(signingKey);
  if (!key) keys.set(signingKey, (key = derivedSecret(signingKey, 'mcp tool calls')));
  return key;
}

/** The proof a tool call sends beside `authorization`. */
export const toolCallProof = async (signingKey: SigningKey, authorization: string): Promise<string> =>
  createHmac('sha256', await keyOf(signingKey))
    .update(authorization)
    .digest('base64url');

/** `mcp` for the MCP endpoint and for a tool call with a valid proof; `rest` otherwise. */
export function requestAudience(signingKey: SigningKey): AudienceOf {
  return async (req) => {
    if (req.path === MCP_PATH) return 'mcp';
    const proof = req.headers[TOOL_CALL_HEADER];
    const authorization = req.headers.authorization;
    if (typeof proof !== 'string' || typeof authorization !== 'string') return 'rest';
    const expected = Buffer.from(await toolCallProof(signingKey, authorization));
    const given = Buffer.from(proof);
    return given.length === expected.length && timingSafeEqual(given, expected) ? 'mcp' : 'rest';
  };
}
