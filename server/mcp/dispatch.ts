// A tool call as the REST request it stands for, sent to this very server over loopback: the same
// authentication, scopes, validation, handler, events, quotas and idempotency as any REST request.
import type { Request } from 'express';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { McpTool } from './tools.js';

type Args = Record<string, unknown>;

const queryValue = (value: unknown): string => (Array.isArray(value) ? value.map(String).join(',') : String(value));

/** The path, query string, headers and body of the REST request a call stands for. */
function requestOf(tool: McpTool, args: Args, outer: Request) {
  const { ifMatch, idempotencyKey, ...fields } = args;
  const path = tool.route.path.replace(/:(\w+)/g, (_whole, name: string) =>
    encodeURIComponent(String(fields[name] ?? '')),
  );
  const query = new URLSearchParams();
  const body: Args = {};
  for (const [name, value] of Object.entries(fields)) {
    if (tool.pathParams.includes(name) || value === undefined) continue;
    // A field the operation does not take goes where its schema will refuse it, as over HTTP.
    if (tool.queryFields.includes(name) || !tool.takesBody) query.set(name, queryValue(value));
    else body[name] = value;
  }
  const headers: Record<string, string> = { accept: 'application/json' };
  if (outer.headers.authorization) headers.authorization = outer.headers.authorization;
  if (typeof outer.id === 'string') headers['x-request-id'] = outer.id;
  if (typeof ifMatch === 'string') headers['if-match'] = ifMatch;
  if (typeof idempotencyKey === 'string') headers['idempotency-key'] = idempotencyKey;
  if (tool.takesBody) headers['content-type'] = 'application/json';
  const search = query.toString();
  return {
    path: search ? `${path}?${search}` : path,
    headers,
    body: tool.takesBody ? JSON.stringify(body) : undefined,
  };
}

/** This server, as the socket the MCP request came in on reached it. */
function ownOrigin(outer: Request): string {
  const { localAddress, localPort } = outer.socket;
  if (localAddress === undefined || localPort === undefined)
    throw new Error('The MCP request has no local address to call back');
  const address = localAddress.replace(/^::ffff:(?=\d+\.)/, ''); // an IPv4 client of a dual-stack socket
  return `http://${address.includes(':') ? `[${address}]` : address}:${localPort}`;
}

/** Runs the call as its REST request and answers as MCP wants: the success answer as structured content, a problem as an error. */
export async function dispatchToolCall(tool: McpTool, args: Args, outer: Request): Promise<CallToolResult> {
  const { path, headers, body } = requestOf(tool, args, outer);
  const response = await fetch(`${ownOrigin(outer)}${path}`, { method: tool.route.method, headers, body });
  const text = await response.text();
  // The problem goes back as text only: the SDK's client checks structuredContent against the output schema even on errors.
  if (response.status >= 400) return { isError: true, content: [{ type: 'text', text }] };
  if (!tool.definition.outputSchema || text === '')
    return { content: [{ type: 'text', text: text || `Done (${response.status})` }] };
  const structured: unknown = JSON.parse(text);
  const structuredContent =
    typeof structured === 'object' && structured !== null && !Array.isArray(structured)
      ? Object.fromEntries(Object.entries(structured))
      : {};
  return { content: [{ type: 'text', text }], structuredContent };
}
