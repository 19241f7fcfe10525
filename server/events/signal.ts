import { perInstance } from './per-instance.js';
import pg from 'pg';
import type { AppContext } from '../context.js';
import { eventMetrics } from './metrics.js';
import { EVENTS_CHANNEL } from './outbox.js';

const RECONNECT_MS = 1_000;
/** Without a direct connection to LISTEN on, readers look for new events this often. */
export const EVENT_POLL_MS = 1_000;

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

  private wakeAll(): void {
    for (const wake of this.subscribers) wake();
  }

  private open(): void {
    this.closed = false;
    const { directUrl } = this.ctx.db;
    if (directUrl) {
      void this.listen(directUrl);
      return;
    }
    this.timer = setInterval(() => this.wakeAll(), EVENT_POLL_MS);
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
    const client = this.client;
    this.client = undefined;
    void client?.end().catch(() => undefined);
  }
}

export const eventSignal = perInstance((ctx) => new EventSignal(ctx));
