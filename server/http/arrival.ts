import type { Request, RequestHandler, Response } from 'express';
import type { Logger } from 'pino';
import type { HttpMetrics } from '../metrics/http-metrics.js';
import { noStore, requestId } from './middleware.js';
import { logRequest } from './request-log.js';

/**
 * What every request goes through as it comes, in this order and in one layer (each Express layer
 * costs every request its turn through the router): its request id; once answered (or its client
 * gone), its metrics and its log line, from one listener; CORS when configured (a preflight is
 * answered there); then the headers of every answer and the forwarding check.
 */
export function arrival(parts: {
  logger: Logger;
  metrics: HttpMetrics;
  cors: RequestHandler | undefined;
  checkForwarding: (req: Request) => void;
}): RequestHandler {
  const { logger, metrics, cors, checkForwarding } = parts;
  const proceed = (req: Request, res: Response, next: (err?: unknown) => void) => {
    noStore(res);
    checkForwarding(req);
    next();
  };
  return (req, res, next) => {
    const startedAt = process.hrtime.bigint();
    const exchange = { startedMs: Date.now(), remoteAddress: req.socket.remoteAddress };
    req.id = requestId(req, res);
    // 'close' comes after 'finish', and alone when the client went away first.
    res.on('close', () => {
      metrics.record(req, res, Number(process.hrtime.bigint() - startedAt) / 1e9);
      logRequest(logger, req, res, exchange);
    });
    if (!cors) return proceed(req, res, next);
    cors(req, res, (err?: unknown) => (err === undefined ? proceed(req, res, next) : next(err)));
  };
}
