import pg from 'pg';
import { BackupError } from './archive.js';

/** A dump or restore ended by a stop signal, said in one line. */
export class BackupStopped extends BackupError {}

export const stoppedBy = (stop: AbortSignal | undefined): string => String(stop?.reason ?? 'a signal');

/**
 * A connection of the command's own. A stop signal cuts it at once, so a query in flight (a COPY,
 * a long DO block) fails now instead of running on; PostgreSQL rolls back what it had begun.
 */
export async function connect(url: string, stop?: AbortSignal): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url, application_name: 'task-service backup' });
  client.on('error', () => undefined); // a cut connection: the query in flight reports it
  const cut = () => client.connection.stream.destroy();
  if (stop?.aborted) throw new BackupStopped(`stopped by ${stoppedBy(stop)}`);
  stop?.addEventListener('abort', cut, { once: true });
  client.once('end', () => stop?.removeEventListener('abort', cut));
  try {
    await client.connect();
  } catch (error) {
    stop?.removeEventListener('abort', cut);
    throw error;
  }
  return client;
}

/** Ends a connection, never waiting on one a stop signal cut. */
export async function disconnect(client: pg.Client): Promise<void> {
  await client.end().catch(() => undefined);
}
