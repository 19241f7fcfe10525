// A tool call as the REST request it stands for, sent to this very server over loopback: the same
// authentication, scopes, validation, handler, events, quotas and idempotency as any REST request.
import type { Request } from 'express';
import { z } from 'zod';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { ValidationIssue } from '@task-service/client';
import { AppError, issuesOf, problemBody, validationFailed } from '../http/errors.js';
import type { McpTool } from './tools.js';

type Args = Record<string, unknown>;

const queryValue = (value: unknown): string => (Array.isArray(value) ? value.map(String).join(',') : String(value));

/** A path segment URL resolution would not take as it is (encodeURIComponent leaves dots alone). */
const DOT_SEGMENT = /^\.{1,2}$/;
/** What a header value may hold (fetch throws on CR, LF and NUL; RFC 9110 §5.5 visible ASCII). */
const HEADER_VALUE = /^[\t\x20-\x7e]*$/;

/**
 * The operation's path with the call's path arguments, each checked against the contract's schema
 * and encoded, so that a call can only ever reach its own operation: `..` in an id is a validation
 * error, never another route (URL resolution would drop the segment before it).
 */
function pathOf(tool: McpTool, fields: Args): string | ValidationIssue[] {
  const given = Object.fromEntries(tool.pathParams.map((name) => [name, fields[name]]));
  const schema = tool.route.pathParams;
  const parsed = schema instanceof z.ZodType ? schema.safeParse(given) : z.record(z.string().min(1)).safeParse(given);
  if (!parsed.success) return issuesOf('path', parsed.error);
  const data: unknown = parsed.data;
  const values = new Map<string, unknown>(typeof data === 'object' && data !== null ? Object.entries(data) : []);
  const issues: ValidationIssue[] = [];
  const path = tool.route.path.replace(/:(\w+)/g, (_whole, name: string) => {
    const segment = encodeURIComponent(String(values.get(name) ?? ''));
    if (segment === '' || DOT_SEGMENT.test(segment))
      issues.push({ path: `path.${name}`, code: 'invalid_string', message: 'Not a value this operation takes' });
    return segment;
  });
  return issues.length > 0 ? issues : path;
}

/** Header arguments that cannot be sent as they are. */
function headerIssues(args: Args): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  for (const [argument, header] of [
    ['ifMatch', 'if-match'],
    ['idempotencyKey', 'idempotency-key'],
  ] as const) {
    const value = args[argument];
    if (typeof value === 'string' && !HEADER_VALUE.test(value))
      issues.push({ path: `header.${header}`, code: 'invalid_string', message: 'Only visible ASCII characters' });
  }
  return issues;
}

/** The path, query string, headers and body of the REST request a call stands for, or why there is none. */
function requestOf(tool: McpTool, args: Args, outer: Request, extraHeaders: Record<string, string>) {
  const { ifMatch, idempotencyKey, ...fields } = args;
  const path = pathOf(tool, fields);
  const issues = [...(typeof path === 'string' ? [] : path), ...headerIssues(args)];
  if (typeof path !== 'string' || issues.length > 0) return { refused: validationFailed(issues) };
  const query = new URLSearchParams();
  const body: Args = {};
  for (const [name, value] of Object.entries(fields)) {
    if (tool.pathParams.includes(name) || value === undefined) continue;
    // A field the operation does not take goes where its schema will refuse it, as over HTTP.
    if (tool.queryFields.includes(name) || !tool.takesBody) query.set(name, queryValue(value));
    else body[name] = value;
  }
  const headers: Record<string, string> = { ...extraHeaders, accept: 'application/json' };
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

/** A problem as MCP carries an error: text only (the SDK's client checks structuredContent against the output schema even on errors). */
export function problemResult(error: AppError, outer: Request): CallToolResult {
  return {
    isError: true,
    content: [{ type: 'text', text: JSON.stringify(problemBody(error, outer.path, String(outer.id))) }],
  };
}

/** Runs the call as its REST request and answers as MCP wants: the success answer as structured content, a problem as an error. */
export async function dispatchToolCall(
  tool: McpTool,
  args: Args,
  outer: Request,
  extraHeaders: Record<string, string> = {},
): Promise<CallToolResult> {
  const request = requestOf(tool, args, outer, extraHeaders);
  if (request.refused) return problemResult(request.refused, outer);
  const { path, headers, body } = request;
  const response = await fetch(`${ownOrigin(outer)}${path}`, { method: tool.route.method, headers, body });
  const text = await response.text();
  // The REST answer's problem, which never carries internals (a 5xx is the generic one with the request id).
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
