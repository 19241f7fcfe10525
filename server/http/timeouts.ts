import type { IncomingMessage, Server } from 'node:http';
import type { Socket } from 'node:net';
import type { HttpTimeouts } from '../config.js';

/**
 * Closes connections that hold a file descriptor without using it: a socket silent for `idleMs`
 * (one that never sends a byte, or stops in the middle of its headers or body) is destroyed, and
 * headers and whole requests have a total too, so trickling a byte at a time does not keep one open.
 * A request the service is still answering is not the client's silence and is left alone (the
 * database's statement timeout bounds that work), unless the answer waits for a client that reads
 * none of it: that one is cut after `responseIdleMs` without progress, with the file it was sending.
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
  // Node reports a timeout only when nothing moved for idleMs, reads and writes alike.
  server.on('timeout', (socket: Socket) => {
    const req = answering.get(socket);
    if (!req?.complete) return socket.destroy();
    // Nothing waits to be sent: the wait is the service's, not the client's.
    if (socket.writableLength === 0) return;
    cutUnlessRead(socket, timeouts.responseIdleMs - timeouts.idleMs);
  });
}

/** Destroys the socket if its client has read nothing more of the answer `afterMs` from now. */
function cutUnlessRead(socket: Socket, afterMs: number): void {
  if (afterMs <= 0) return void socket.destroy();
  const sent = socket.bytesWritten;
  // When the client reads meanwhile, Node's own timer runs again and reports the next stall.
  setTimeout(() => {
    if (!socket.destroyed && socket.bytesWritten === sent && socket.writableLength > 0) socket.destroy();
  }, afterMs).unref();
}
