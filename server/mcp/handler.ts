// The MCP endpoint's handler: the SDK's server and transport per request, over the tools derived
// from the contract (loaded by router.ts at the first call: most processes never get one).
import type { Request, RequestHandler } from 'express';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { grantsScope } from '@task-service/client';
import type { AppContext } from '../context.js';
import { AppError, toAppError } from '../http/errors.js';
import { callerOf, isAdmin, type Principal } from '../http/principal.js';
import { packageVersion } from '../project-root.js';
import { TOOL_CALL_HEADER, toolCallProof } from './audience.js';
import { dispatchToolCall, problemResult } from './dispatch.js';
import { contractTools, type McpTool } from './tools.js';

/**
 * The tools the caller may use: an administrator's only to one acting as an administrator (a
 * token's owner with the admin scope); every other tool to a login, and to a token with its scope.
 */
const visibleTo = (principal: Principal) => (tool: McpTool) => {
  if (tool.scope === 'admin' && !isAdmin(principal)) return false;
  return !principal.token || (tool.scope !== undefined && grantsScope(principal.token.scopes, tool.scope));
};

const noSuchTool = (name: string, req: Request): CallToolResult =>
  problemResult(new AppError('not_found', `No tool named ${name} is available to this token`), req);

/** A browser page on another site must not reach the endpoint through the user's network (the spec's DNS-rebinding rule). */
function assertAllowedOrigin(req: Request, corsOrigins: string[]): void {
  const origin = req.headers.origin;
  if (origin === undefined || corsOrigins.includes('*') || corsOrigins.includes(origin)) return;
  throw new AppError('forbidden', `Origin ${origin} may not use this endpoint (CORS_ORIGINS)`);
}

/** The proof that a tool call comes from this endpoint, so a token for /mcp only holds on it (audience.ts). */
async function toolCallHeaders(ctx: AppContext, req: Request): Promise<Record<string, string>> {
  const authorization = req.headers.authorization;
  return authorization === undefined ? {} : { [TOOL_CALL_HEADER]: await toolCallProof(ctx.signingKey, authorization) };
}

/** Answers POST /mcp; tools are derived from the contract once, here. */
export function mcpHandler(ctx: AppContext): RequestHandler {
  const tools = contractTools();
  const version = packageVersion();

  return async (req, res) => {
    assertAllowedOrigin(req, ctx.config.corsOrigins);
    const principal = callerOf(req);
    const visible = visibleTo(principal);

    // Stateless: a server and a transport per request, as the SDK prescribes when there is no session.
    const server = new Server({ name: 'task-service', version }, { capabilities: { tools: { listChanged: false } } });
    server.setRequestHandler(ListToolsRequestSchema, () => ({
      tools: [...tools.values()].filter(visible).map((tool) => tool.definition),
    }));
    server.setRequestHandler(CallToolRequestSchema, (request) => {
      const tool = tools.get(request.params.name);
      if (!tool || !visible(tool)) return noSuchTool(request.params.name, req);
      return toolCallHeaders(ctx, req)
        .then((headers) => dispatchToolCall(tool, request.params.arguments ?? {}, req, headers))
        .catch((error: unknown) => {
          // The SDK would answer an exception with its message; the caller gets the generic problem
          // with the request id, the log the exception.
          ctx.logger.error({ err: error, requestId: req.id, tool: tool.definition.name }, 'an MCP tool call failed');
          return problemResult(toAppError(error), req);
        });
    });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
  };
}
