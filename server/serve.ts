import { createServer, IncomingMessage, ServerResponse, type Server } from 'node:http';
import type { Express } from 'express';
import type { Duplex } from 'node:stream';
import { v7 as uuidv7 } from 'uuid';
import { buildApp } from './app.js';
import type { AppContext } from './context.js';
import { streamHub } from './events/streams.js';
import { AppError, problemBody } from './http/errors.js';
import { listen } from './http/listen.js';
import { capConnectionsPerAddress } from './http/connection-cap.js';
import { applyConnectionTimeouts } from './http/timeouts.js';

export interface Serving {
  port: number;
  /** Stops taking connections, ends event streams at once, lets requests in flight finish within `graceMs` (then cuts them). */
  close(graceMs: number): Promise<void>;
}

/** The path of the request line Node's parser refused, when it got that far. */
function refusedPath(error: Error): string {
  const packet =
    'rawPacket' in error && Buffer.isBuffer(error.rawPacket)
      ? error.rawPacket.subarray(0, 2048).toString('latin1')
      : '';
  const target = /^[A-Z]+ (\/[^ ?\r\n]*)/.exec(packet)?.[1];
  return target && target.length < 2048 ? target : '/';
}

/**
 * A request Node's parser refuses before the app sees it (headers or URL over 16 KiB, a malformed
 * request line) still gets a problem+json answer, as every error does.
 */
function answerUnparsableRequests(server: Server): void {
  server.on('clientError', (error: Error, socket: Duplex) => {
    const code = 'code' in error ? String(error.code) : '';
    if (!code.startsWith('HPE_') || !socket.writable) return socket.destroy();
    const detail =
      code === 'HPE_HEADER_OVERFLOW'
        ? 'The request line and headers must fit in 16 KiB'
        : 'The request is not well-formed HTTP/1.1';
    const id = uuidv7();
    const body = JSON.stringify(problemBody(new AppError('validation_failed', detail), refusedPath(error), id));
    socket.end(
      'HTTP/1.1 400 Bad Request\r\nContent-Type: application/problem+json\r\n' +
        `X-Request-Id: ${id}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
}

/**
 * Node's HTTP server for `app`, whose requests and responses are born with the app's prototypes.
 * Express gives each request and response the app's prototypes as it enters
 * (`Object.setPrototypeOf`): on objects born with Node's, that cost ~0.03 ms of CPU a request and
 * left Node's HTTP code handling objects of two shapes (an Express app answering a fixed body:
 * 0.063 ms a request, 0.020 ms born with them; docs/benchmarks.md). Born with them, it is a no-op.
 */
function serverOf(app: Express): Server {
  class AppRequest extends IncomingMessage {}
  class AppResponse extends ServerResponse {}
  Object.setPrototypeOf(AppRequest.prototype, app.request);
  Object.setPrototypeOf(AppResponse.prototype, app.response);
  // The prototypes Express sets are now the ones the objects have: the app's, one link further.
  Object.defineProperty(app, 'request', { value: AppRequest.prototype });
  Object.defineProperty(app, 'response', { value: AppResponse.prototype });
  return createServer({ IncomingMessage: AppRequest, ServerResponse: AppResponse }, app);
}

/**
 * The service's HTTP server, with its connection timeouts, its cap on connections per client
 * address and its answer to unparsable requests.
 */
export function createHttpServer(ctx: AppContext): Server {
  const server = serverOf(buildApp(ctx));
  applyConnectionTimeouts(server, ctx.config.httpTimeouts);
  // Each HTTP worker holds its share: the main process hands connections out in turn.
  const { maxConnectionsPerAddress, webConcurrency } = ctx.config;
  capConnectionsPerAddress(server, Math.ceil(maxConnectionsPerAddress / webConcurrency), ctx.logger);
  answerUnparsableRequests(server);
  return server;
}

/** The HTTP server of one process (the main one, or a cluster worker). */
export async function serve(ctx: AppContext): Promise<Serving> {
  const server = createHttpServer(ctx);
  const port = await listen(server, ctx.config.port, ctx.config.host);
  return {
    port,
    close: (graceMs) =>
      new Promise<void>((resolve) => {
        // A stream never finishes by itself: its clients reconnect (to another instance) and resume.
        streamHub(ctx).closeAll();
        const force = setTimeout(() => server.closeAllConnections(), graceMs).unref();
        server.close(() => {
          clearTimeout(force);
          resolve();
        });
        server.closeIdleConnections();
      }),
  };
}
