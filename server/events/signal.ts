import { perInstance } from './per-instance.js';
import pg from 'pg';
import { afterCommit } from '../db/answer-keeper.js';
import type { SqlSession } from '../db/sql.js';
import type { AppContext } from '../context.js';
import { eventMetrics } from './metrics.js';
import { EVENTS_CHANNEL } from './outbox.js';

const RECONNECT_MS = 1_000;
/** Without a direct connection to LISTEN on, readers look for new events this often. */
export const EVENT_POLL_MS = 1_000;
/** With LISTEN, readers still look this often: for what a process killed between commit and NOTIFY never announced. */
const SAFETY_POLL_MS = 10_000;

export type Wake = () => void;

/**
 * Tells this instance's readers (live streams, the webhook worker) that events may have committed,
 * on any instance: ONE dedicated connection LISTENs for the whole process while anyone subscribes.
 * A lost connection is re-opened, and everyone is woken then, as notifications may have been missed.
 * LISTEN needs PostgreSQL itself (a transaction pooler hands each transaction to another server
 * connection): without a direct URL, everyone is woken every EVENT_POLL_MS instead.
 */
export class EventSignal {
  private readonly subscribers = new Set<Wake>();
  private client: pg.Client | undefined;
  private timer: NodeJS.Timeout | undefined;
  private safetyPoll: NodeJS.Timeout | undefined;
  private closed = true;

  constructor(private readonly ctx: AppContext) {}

  /** Calls `wake` on every signal until the returned function is called. */
  subscribe(wake: Wake): () => void {
    this.subscribers.add(wake);
    if (this.closed) this.open();
    return () => {
      this.subscribers.delete(wake);
      if (this.subscribers.size === 0) this.close();
    };
  }

  /** Wakes this process's readers: those of other processes hear of it through PostgreSQL. */
  wakeAll(): void {
    for (const wake of this.subscribers) wake();
  }

  private open(): void {
    this.closed = false;
    const { directUrl } = this.ctx.db;
    if (directUrl) {
      this.safetyPoll = setInterval(() => this.wakeAll(), SAFETY_POLL_MS);
      this.safetyPoll.unref();
      void this.listen(directUrl);
      return;
    }
    this.timer = setInterval(() => {
      eventMetrics(this.ctx).signals.inc();
      this.wakeAll();
    }, EVENT_POLL_MS);
    this.timer.unref();
  }

  private async listen(url: string): Promise<void> {
    const client = new pg.Client({ connectionString: url, application_name: 'task-service event listener' });
    this.client = client;
    const retry = () => {
      if (this.client !== client) return;
      this.client = undefined;
      client.end().catch(() => undefined);
      if (this.closed) return;
      this.timer = setTimeout(() => {
        this.wakeAll();
        if (!this.closed) void this.listen(url);
      }, RECONNECT_MS);
      this.timer.unref();
    };
    client.on('notification', () => {
      eventMetrics(this.ctx).signals.inc();
      this.wakeAll();
    });
    client.on('error', (error) => {
      this.ctx.logger.warn({ err: error }, 'the event listener lost its database connection; reconnecting');
      retry();
    });
    client.on('end', retry);
    try {
      await client.connect();
      await client.query(`LISTEN ${EVENTS_CHANNEL}`);
      this.wakeAll(); // what committed while nobody listened
    } catch (error) {
      this.ctx.logger.warn({ err: error }, 'the event listener could not connect; retrying');
      retry();
    }
  }

  private close(): void {
    this.closed = true;
    clearTimeout(this.timer); // the reconnection's, or the polling interval
    clearInterval(this.safetyPoll);
    const client = this.client;
    this.client = undefined;
    void client?.end().catch(() => undefined);
  }
}

export const eventSignal = perInstance((ctx) => new EventSignal(ctx));

/**
 * Tells every reader of every instance that events committed: called after the commit, never by a
 * NOTIFY inside the writing transaction, where it would take a cluster-wide lock at commit and
 * serialise every writer. Coalesced: one NOTIFY in flight per process, and one more
 * after it for whatever committed meanwhile. A process killed between a commit and its
 * announcement leaves the others to their safety poll.
 */
class CommitAnnouncer {
  private sending = false;
  private again = false;

  constructor(private readonly ctx: AppContext) {}

  announce(): void {
    eventMetrics(this.ctx).signals.inc();
    eventSignal(this.ctx).wakeAll(); // this process's readers at once
    if (this.sending) {
      this.again = true;
      return;
    }
    this.sending = true;
    void this.send();
  }

  private async send(): Promise<void> {
    do {
      this.again = false;
      await this.ctx.db.sql.exec(`NOTIFY ${EVENTS_CHANNEL}`).catch((error: unknown) => {
        this.ctx.logger.debug(
          { err: error },
          'could not announce committed events; other instances find them at their next poll',
        );
      });
    } while (this.again);
    this.sending = false;
  }
}

const commitAnnouncer = perInstance((ctx) => new CommitAnnouncer(ctx));

/**
 * After a transaction that wrote events (or webhook deliveries) has committed: see CommitAnnouncer.
 * Under an Idempotency-Key the transaction commits with the answer, so the announcement waits for that.
 */
export const announceEvents = (ctx: AppContext): void => afterCommit(() => commitAnnouncer(ctx).announce());

/**
 * A transaction that records events (server/events/outbox.ts), announced once it has committed (see
 * SqlDatabase.transaction: it runs again on a conflict, and commits with the answer under an
 * Idempotency-Key).
 */
export async function recordingEvents<T>(ctx: AppContext, work: (tx: SqlSession) => Promise<T>): Promise<T> {
  const result = await ctx.db.sql.transaction(work);
  announceEvents(ctx);
  return result;
}
