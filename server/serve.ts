import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { v7 as uuidv7 } from 'uuid';
import { buildApp } from './app.js';
import type { AppContext } from './context.js';
import { streamHub } from './events/streams.js';
import { AppError, problemBody } from './http/errors.js';
import { applyConnectionTimeouts } from './http/timeouts.js';
import { OperatorError } from './operator-error.js';

/** Says in one line why `port` cannot be listened on, before anything else starts (the database among them). */
export async function checkPortFree(port: number, host: string): Promise<void> {
  if (port === 0) return;
  const probe = createServer();
  await listen(probe, port, host);
  await new Promise((resolve) => probe.close(resolve));
}

/** Listens, or says in one line why it cannot. */
async function listen(server: Server, port: number, host: string): Promise<number> {
  server.listen(port, host);
  try {
    await once(server, 'listening');
  } catch (error) {
    const code = error instanceof Error && 'code' in error ? error.code : undefined;
    if (code === 'EADDRINUSE') throw new OperatorError(`Port ${port} on ${host} is in use: stop what listens there, or set PORT to another port.`);
    if (code === 'EACCES') throw new OperatorError(`Port ${port} on ${host} needs privileges this process lacks: set PORT to 1024 or above.`);
    if (code === 'EADDRNOTAVAIL') throw new OperatorError(`HOST ${host} is not an address of this machine: set HOST (0.0.0.0 for every interface).`);
    throw error;
  }
  const address = server.address();
  return typeof address === 'object' && address ? address.port : port;
}

export interface Serving {
  port: number;
  /** Stops taking connections, ends event streams at once, lets requests in flight finish within `graceMs` (then cuts them). */
  close(graceMs: number): Promise<void>;
}

/** The path of the request line Node's parser refused, when it got that far. */
function refusedPath(error: Error): string {
  const packet = 'rawPacket' in error && Buffer.isBuffer(error.rawPacket) ? error.rawPacket.subarray(0, 2048).toString('latin1') : '';
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
    const detail = code === 'HPE_HEADER_OVERFLOW' ? 'The request line and headers must fit in 16 KiB' : 'The request is not well-formed HTTP/1.1';
    const id = uuidv7();
    const body = JSON.stringify(problemBody(new AppError('validation_failed', detail), refusedPath(error), id));
    socket.end(
      'HTTP/1.1 400 Bad Request\r\nContent-Type: application/problem+json\r\n' +
        `X-Request-Id: ${id}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
}

/** The service's HTTP server, with its connection timeouts and its answer to unparsable requests. */
export function createHttpServer(ctx: AppContext): Server {
  const server = createServer(buildApp(ctx));
  applyConnectionTimeouts(server, ctx.config.httpTimeouts);
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
