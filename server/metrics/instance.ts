import { collectDefaultMetrics, Gauge, Registry } from 'prom-client';
import type { AppContext } from '../context.js';
import { eventMetrics } from '../events/metrics.js';
import { perInstance } from '../events/per-instance.js';

/** The database connection pool of one process, read at each scrape. */
const databaseMetrics = perInstance((ctx: AppContext) => {
  const registry = new Registry();
  const stats = () => ctx.db.poolStats();
  new Gauge({
    name: 'db_pool_connections',
    help: 'Connections of the database pool, by state (idle, in_use)',
    labelNames: ['state'],
    registers: [registry],
    collect() {
      const { open, idle } = stats();
      this.set({ state: 'idle' }, idle);
      this.set({ state: 'in_use' }, open - idle);
    },
  });
  new Gauge({
    name: 'db_pool_max_connections',
    help: 'The most connections the database pools may open (DATABASE_POOL_SIZE per process)',
    registers: [registry],
    collect() {
      this.set(stats().max);
    },
  });
  new Gauge({
    name: 'db_pool_waiting_queries',
    help: 'Queries waiting for a connection of the database pool',
    registers: [registry],
    collect() {
      this.set(stats().waiting);
    },
  });
  return registry;
});

/** What every process of an instance measures beside its HTTP requests: the event system and its pool. */
export const processRegistries = (ctx: AppContext): Registry[] => [eventMetrics(ctx).registry, databaseMetrics(ctx)];

/** The main process of several HTTP workers serves no requests; it has its own process metrics. */
export function mainProcessRegistries(ctx: AppContext): () => Registry[] {
  const own = new Registry();
  collectDefaultMetrics({ register: own });
  return () => [own, ...processRegistries(ctx)];
}
