// The stack baseline's database: a pg pool as the service has it on a direct connection (pg's
// pipeline mode, every statement prepared under a name), single statements, and transactions whose
// statements leave in one round trip, BEGIN to COMMIT.
import pg from 'pg';

export interface Statement {
  text: string;
  values?: unknown[];
}

export interface StackDb {
  query<T extends pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<T>>;
  /** A statement without parameters, unprepared (simple query protocol), as the service sends its NOTIFY. */
  exec(text: string): Promise<void>;
  /** The statements in one transaction sent at once; each one's rows. A failing one rolls all back and throws. */
  pipeline(statements: Statement[]): Promise<pg.QueryResultRow[][]>;
}

export function stackDb(databaseUrl: string, poolSize: number): StackDb {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: poolSize, pipeline: true });
  // The row with the other worker count restarts the service, and with it the embedded server: the
  // idle connections it closes are replaced on the next query (pg.Pool without this listener throws).
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
  // Every statement named, so each connection parses and plans it once: as the service does on a
  // direct connection (server/db/sql.ts), and the best this stack can do.
  const names = new Map<string, string>();
  const named = ({ text, values }: Statement): pg.QueryConfig => {
    const name = names.get(text) ?? `s${names.size + 1}`;
    names.set(text, name);
    return { name, text, values };
  };
  return {
    query: (text, values) => pool.query(named({ text, values })),
    exec: async (text) => {
      await pool.query(text);
    },
    pipeline: async (statements) => {
      const client = await pool.connect();
      const sent = [
        client.query('BEGIN'),
        ...statements.map((statement) => client.query(named(statement))),
        client.query('COMMIT'),
      ];
      const settled = await Promise.allSettled(sent);
      const [opened, committed] = [settled[0], settled[settled.length - 1]];
      const broken = [opened, committed].find((step) => step?.status === 'rejected');
      client.release(broken ? new Error('the connection broke') : undefined);
      const failed = settled.find((step): step is PromiseRejectedResult => step.status === 'rejected');
      if (failed) throw failed.reason;
      return settled.slice(1, -1).map((step) => (step.status === 'fulfilled' ? step.value.rows : []));
    },
  };
}

/**
 * Wakes the event readers after a commit, as the service does (one NOTIFY in flight, and one more
 * for whatever committed meanwhile): a NOTIFY inside the write would serialise every commit.
 */
export function commitAnnouncer(db: StackDb, channel: string): () => void {
  let sending = false;
  let again = false;
  const send = async () => {
    do {
      again = false;
      await db.exec(`NOTIFY ${channel}`).catch(() => undefined);
    } while (again);
    sending = false;
  };
  return () => {
    if (sending) {
      again = true;
      return;
    }
    sending = true;
    void send();
  };
}
