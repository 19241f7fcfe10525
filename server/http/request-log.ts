import type { Request, Response } from 'express';
import type { Level, Logger } from 'pino';
import { isServiceProbe } from './middleware.js';

declare module 'http' {
  interface IncomingMessage {
    /** The request id: the caller's X-Request-Id when well formed, else a new one (answered in X-Request-Id). */
    id: string;
  }
  interface ServerResponse {
    /** The failure behind a 5xx answer, for the request's log line (set by the error handler). */
    err?: Error;
  }
}

/** A failure or a 5xx at error, other 4xx at warn; the probes (every few seconds) at debug, the rest at info. */
function levelOf(url: string, statusCode: number, err: Error | undefined): Level {
  if (err || statusCode >= 500) return 'error';
  if (statusCode >= 400) return 'warn';
  return isServiceProbe({ url }) ? 'debug' : 'info';
}

/**
 * One line per request when its answer is sent (or its connection closes first): what was asked,
 * by which address, under which request id, how it ended and in how long; a 5xx with its error and
 * stack. The line is built only when its level is logged: pino-http, which this replaces, made a
 * child logger holding the serialised request for every request, even at `warn`, a twentieth of a
 * small read's CPU. `remoteAddress` is read when the request came: once the client has gone, its
 * socket no longer says.
 */
export function logRequest(
  logger: Logger,
  req: Request,
  res: Response,
  exchange: { startedMs: number; remoteAddress: string | undefined },
): void {
  // A success's line is at info or debug: with info off (LOG_LEVEL=warn), nothing more to decide.
  if (res.statusCode < 400 && res.err === undefined && !logger.isLevelEnabled('info')) return;
  const aborted = !res.writableFinished;
  const err = res.err ?? (res.statusCode >= 500 ? new Error(`failed with status code ${res.statusCode}`) : undefined);
  const level = levelOf(req.url, res.statusCode, err);
  if (!logger.isLevelEnabled(level)) return;
  const line = {
    req: { id: req.id, method: req.method, url: req.originalUrl, remoteAddress: exchange.remoteAddress },
    res: { statusCode: res.statusCode },
    responseTime: Date.now() - exchange.startedMs,
    ...(err && { err }),
  };
  logger[level](line, aborted ? 'request aborted' : err ? 'request errored' : 'request completed');
}
