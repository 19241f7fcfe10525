import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';

/**
 * Holds one client address to at most `max` open connections, so that one client cannot take
 * every file descriptor of the process: a connection past it is closed at once, before a byte of
 * it is read. The address is the TCP peer's (a proxy in front counts as one client).
 */
export function capConnectionsPerAddress(server: Server, max: number, logger: Logger): void {
  const held = new Map<string, number>();
  // Addresses at the cap already reported, so that a client hammering it makes one line, not one per attempt.
  const reported = new Set<string>();
  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress;
    if (address === undefined) return; // already gone
    const count = held.get(address) ?? 0;
    if (count >= max) {
      if (!reported.has(address)) {
        reported.add(address);
        logger.warn(
          { remoteAddress: address, max },
          'a client address holds MAX_CONNECTIONS_PER_ADDRESS connections: closing its further ones',
        );
      }
      socket.destroy();
      return;
    }
    held.set(address, count + 1);
    socket.once('close', () => {
      const left = (held.get(address) ?? 1) - 1;
      if (left > 0) held.set(address, left);
      else held.delete(address);
      if (left < max) reported.delete(address);
    });
  });
}
