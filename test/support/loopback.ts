import { once } from 'node:events';
import type { Server } from 'node:net';

/** Puts `server` on an ephemeral port of 127.0.0.1; resolves with the port once it listens. */
export async function listenOnLoopback(server: Server): Promise<number> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('expected a TCP address');
  return address.port;
}
