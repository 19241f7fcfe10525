import type { Request, Response } from 'express';
import { collectDefaultMetrics, Counter, Histogram, Registry } from 'prom-client';

const LABELS = ['method', 'route', 'status'] as const;
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/**
 * The route a request matched, as its path template (`/tasks/:task_id`), or "unmatched": never the
 * raw URL, so ids do not multiply the label values. Contract routes are registered under the
 * contract's own path, so Express's matched route is that template.
 */
export function routeTemplate(req: Request): string {
  const template: unknown = req.route?.path;
  return typeof template === 'string' ? template : 'unmatched';
}

export interface HttpMetrics {
  /** One registry per app, so tests can build many apps in one process. */
  registry: Registry;
  /** Counts and times a request whose response has ended (or whose client went away), `seconds` after it came. */
  record(req: Request, res: Response, seconds: number): void;
}

export function httpMetrics(): HttpMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const requests = new Counter({
    name: 'http_requests_total',
    help: 'HTTP requests answered',
    labelNames: LABELS,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'Time from receiving a request to the end of its response',
    labelNames: LABELS,
    buckets: DURATION_BUCKETS,
    registers: [registry],
  });

  // Each series' children, found once: prom-client hashes the labels object on every call otherwise.
  // As many as the label values, which are bounded (methods, route templates, status codes).
  const series = new Map<string, { count: Counter.Internal; time: Histogram.Internal<(typeof LABELS)[number]> }>();
  const record = (req: Request, res: Response, seconds: number) => {
    const route = routeTemplate(req);
    const key = `${req.method} ${route} ${res.statusCode}`;
    let children = series.get(key);
    if (!children) {
      const labels = { method: req.method, route, status: String(res.statusCode) };
      children = { count: requests.labels(labels), time: duration.labels(labels) };
      series.set(key, children);
    }
    children.count.inc();
    children.time.observe(seconds);
  };
  return { registry, record };
}
