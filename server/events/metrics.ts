import { perInstance } from './per-instance.js';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

/** The event system's metrics of one service instance, scraped with the HTTP metrics at /metrics. */
export interface EventMetrics {
  registry: Registry;
  openStreams: Gauge;
  deliveryAttempts: Counter<'outcome'>;
  deliveryDuration: Histogram;
  deliveryLag: Histogram;
}

function create(): EventMetrics {
  const registry = new Registry();
  return {
    registry,
    openStreams: new Gauge({ name: 'event_streams_open', help: 'Live event streams (GET /events) open on this instance', registers: [registry] }),
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
  };
}

export const eventMetrics = perInstance(create);
