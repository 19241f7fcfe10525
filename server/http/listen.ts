import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { OperatorError } from '../operator-error.js';

/** Says in one line why `port` cannot be listened on, before anything else starts (the database among them). */
export async function checkPortFree(port: number, host: string): Promise<void> {
  if (port === 0) return;
  const probe = createServer();
  await listen(probe, port, host);
  await new Promise((resolve) => probe.close(resolve));
}

/** Listens, or says in one line why it cannot. */
export async function listen(server: Server, port: number, host: string): Promise<number> {
  server.listen(port, host);
  try {
    await once(server, 'listening');
  } catch (error) {
    const code = error instanceof Error && 'code' in error ? error.code : undefined;
    if (code === 'EADDRINUSE')
      throw new OperatorError(
        `Port ${port} on ${host} is in use: stop what listens there, or set PORT to another port.`,
      );
    if (code === 'EACCES')
      throw new OperatorError(
        `Port ${port} on ${host} needs privileges this process lacks: set PORT to 1024 or above.`,
      );
    if (code === 'EADDRNOTAVAIL')
      throw new OperatorError(
        `HOST ${host} is not an address of this machine: set HOST (0.0.0.0 for every interface).`,
      );
    throw error;
  }
  const address = server.address();
  return typeof address === 'object' && address ? address.port : port;
}
