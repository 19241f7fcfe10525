import { once } from 'node:events';
import { afterAll, beforeAll } from 'vitest';
import { createHttpServer } from '../../server/serve.js';
import { startService, type TestService } from './app.js';

export interface ListeningService {
  /** `http://127.0.0.1:<port>` of the app listening on an ephemeral port. */
  baseUrl: string;
  close(): Promise<void>;
}

/** The service's app on a real socket (port 0 unless given), for clients that speak HTTP themselves. */
export async function listen(service: TestService, port = 0): Promise<ListeningService> {
  const server = createHttpServer(service.ctx);
  server.listen(port, '127.0.0.1');
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

/**
 * One service listening on a real socket for the whole test file (or the describe block it is called
 * in): started before its first test and stopped after its last. `const served = listeningForFile();` then `served.service`, `served.baseUrl`.
 */
export function listeningForFile(env: Record<string, string> = {}): {
  readonly service: TestService;
  readonly baseUrl: string;
} {
  let service: TestService | undefined;
  let listening: ListeningService | undefined;
  beforeAll(async () => {
    service = await startService(env);
    listening = await listen(service);
  });
  afterAll(async () => {
    await listening?.close();
    await service?.close();
  });
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('The service starts in beforeAll');
    return value;
  };
  return {
    get service() {
      return started(service);
    },
    get baseUrl() {
      return started(listening).baseUrl;
    },
  };
}
