// POST /mcp: the Model Context Protocol over its Streamable HTTP transport, stateless (no MCP
// session, so any instance answers any request). A thin adapter: tools come from the contract and
// every call runs through the same application as the REST request it stands for.
import type { Express, RequestHandler } from 'express';
import type { AppContext } from '../context.js';
import { AppError } from '../http/errors.js';

const MCP_PATH = '/mcp';

/** Serves /mcp on `app`; the MCP SDK and the tools are loaded at the first call (handler.ts). */
export function serveMcp(app: Express, ctx: AppContext): void {
  let handler: Promise<RequestHandler> | undefined;
  app.post(MCP_PATH, async (req, res, next) => {
    handler ??= import('./handler.js').then(({ mcpHandler }) => mcpHandler(ctx));
    await (
      await handler
    )(req, res, next);
  });
  // No MCP session, so no stream to open (GET) or session to end (DELETE).
  app.all(MCP_PATH, (_req, _res, next) =>
    next(
      new AppError('method_not_allowed', 'The MCP endpoint is stateless: only POST', { headers: { Allow: 'POST' } }),
    ),
  );
}
