import type { IncomingMessage, Server } from 'node:http';
import type { Socket } from 'node:net';
import type { HttpTimeouts } from '../config.js';

/**
 * Closes connections that hold a file descriptor without using it: a socket silent for `idleMs`
 * (one that never sends a byte, or stops in the middle of its headers or body) is destroyed, and
 * headers and whole requests have a total too, so trickling a byte at a time does not keep one open.
 * A request the service is still answering is not the client's silence and is left alone: the
 * database's statement timeout bounds that work.
 */
export function applyConnectionTimeouts(server: Server, timeouts: HttpTimeouts): void {
  server.headersTimeout = timeouts.headersMs;
  server.requestTimeout = timeouts.requestMs;
  server.keepAliveTimeout = timeouts.keepAliveMs;
  server.timeout = timeouts.idleMs;

  const answering = new WeakMap<Socket, IncomingMessage>();
  server.on('request', (req: IncomingMessage, res: { once(event: 'close', listener: () => void): unknown }) => {
    answering.set(req.socket, req);
    res.once('close', () => {
      if (answering.get(req.socket) === req) answering.delete(req.socket);
    });
  });
  // With a listener here Node leaves timed-out sockets to us (instead of destroying every one).
  server.on('timeout', (socket: Socket) => {
    const req = answering.get(socket);
    if (req?.complete) return; // the whole request arrived: the wait is ours, not the client's
    socket.destroy();
  });
}
