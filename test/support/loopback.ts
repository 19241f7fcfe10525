import { once } from 'node:events';
import type { Server } from 'node:net';

/** Puts `server` on `port` of 127.0.0.1 (an ephemeral one by default); resolves with the port once it listens. */
export async function listenOnLoopback(server: Server, port = 0): Promise<number> {
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('expected a TCP address');
  return address.port;
}
