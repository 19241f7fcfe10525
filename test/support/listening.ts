import { once } from 'node:events';
import { createHttpServer } from '../../server/serve.js';
import type { TestService } from './app.js';

export interface ListeningService {
  /** `http://127.0.0.1:<port>` of the app listening on an ephemeral port. */
  baseUrl: string;
  close(): Promise<void>;
}

/** The service's app on a real socket (port 0), for clients that speak HTTP themselves. */
export async function listen(service: TestService): Promise<ListeningService> {
  const server = createHttpServer(service.ctx);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('expected a TCP address');
  return {
    baseUrl: `http://127.0.0.1:${address.port}`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}
