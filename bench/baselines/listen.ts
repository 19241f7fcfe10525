// A baseline server runs in its own process: it listens on a free port and tells the harness which.
import { once } from 'node:events';
import type { Server } from 'node:http';
import { z } from 'zod';

export const ListeningSchema = z.object({ port: z.number().int() });

export async function listenAndReport(server: Server): Promise<void> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('not listening on TCP');
  process.send?.({ port: address.port } satisfies z.infer<typeof ListeningSchema>);
  process.on('disconnect', () => process.exit(0));
}
