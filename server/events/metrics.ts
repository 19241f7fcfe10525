import { perInstance } from './per-instance.js';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

/** The event system's metrics of one service instance, scraped with the HTTP metrics at /metrics. */
export interface EventMetrics {
  registry: Registry;
  openStreams: Gauge;
  streamsOpened: Counter;
  streamEventsSent: Counter;
  signals: Counter;
  fanoutReads: Counter;
  fanoutEvents: Counter;
  deliveryAttempts: Counter<'outcome'>;
  deliveryDuration: Histogram;
  deliveryLag: Histogram;
  unreadableEvents: Counter<'reader'>;
}

function create(): EventMetrics {
  const registry = new Registry();
  return {
    registry,
    openStreams: new Gauge({
      name: 'event_streams_open',
      help: 'Live event streams (GET /events) open on this instance',
      registers: [registry],
    }),
    streamsOpened: new Counter({
      name: 'event_streams_opened_total',
      help: 'Live event streams opened',
      registers: [registry],
    }),
    streamEventsSent: new Counter({
      name: 'event_stream_events_sent_total',
      help: 'Events written to live event streams',
      registers: [registry],
    }),
    signals: new Counter({
      name: 'event_signals_total',
      help: "Wake-ups of this instance's event readers: its own commits, commit signals from other processes (LISTEN/NOTIFY), or polls when there is no direct connection to listen on",
      registers: [registry],
    }),
    fanoutReads: new Counter({
      name: 'event_fanout_reads_total',
      help: 'Reads of the event log made to fan events out to live streams',
      registers: [registry],
    }),
    fanoutEvents: new Counter({
      name: 'event_fanout_events_total',
      help: 'Events read from the log and fanned out to live streams',
      registers: [registry],
    }),
    deliveryAttempts: new Counter({
      name: 'webhook_delivery_attempts_total',
      help: 'Webhook delivery attempts by outcome (succeeded, failed)',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    deliveryDuration: new Histogram({
      name: 'webhook_delivery_duration_seconds',
      help: 'Time from sending a webhook delivery to its answer (or failure)',
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    deliveryLag: new Histogram({
      name: 'webhook_delivery_lag_seconds',
      help: 'Time from the event to the end of its first successful delivery',
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 5, 30, 300, 3600, 86400],
      registers: [registry],
    }),
    unreadableEvents: new Counter({
      name: 'events_unreadable_total',
      help: 'Events in the log that do not read as the contract says, skipped by a reader (log: the changes feed and live streams; webhook: a delivery, failed without retries)',
      labelNames: ['reader'],
      registers: [registry],
    }),
  };
}

export const eventMetrics = perInstance(create);
