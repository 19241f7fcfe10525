import cluster from 'node:cluster';
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Express, Request, RequestHandler } from 'express';
import { Registry } from 'prom-client';
import type { AppContext } from '../context.js';
import { AppError } from '../http/errors.js';
import { callerOf, isAdmin } from '../http/principal.js';
import { instanceMetricsFromMainProcess, reportMetricsToMainProcess } from './cluster.js';
import type { HttpMetrics } from './http-metrics.js';
import { processRegistries } from './instance.js';

const digest = (value: string) => createHash('sha256').update(value).digest();

/** Compares in constant time (over the digests, so lengths do not leak either). */
const isScrapeToken = (authorization: string | undefined, token: string | undefined): boolean =>
  token !== undefined &&
  authorization !== undefined &&
  timingSafeEqual(digest(authorization), digest(`Bearer ${token}`));

/**
 * /metrics is not public: it answers the static scrape token (METRICS_TOKEN) or an admin's access
 * token, both sent as Bearer; 401 without a valid token, 403 for a non-admin user.
 */
async function authorizeScrape(ctx: AppContext, req: Request): Promise<void> {
  if (isScrapeToken(req.headers.authorization, ctx.config.metricsToken)) return;
  const principal = callerOf(req);
  if (!isAdmin(principal)) throw new AppError('forbidden', 'Metrics are for administrators and the scrape token');
}

/**
 * /metrics describes the whole instance: this process's registries, or, in a cluster worker, the sum
 * over every worker and the main process, which the main process collects (./cluster.ts).
 */
export function serveMetrics(app: Express, ctx: AppContext, metrics: HttpMetrics): void {
  const registries = () => [metrics.registry, ...processRegistries(ctx)];
  if (cluster.isWorker) reportMetricsToMainProcess(registries);
  const scrape: RequestHandler = async (req, res) => {
    await authorizeScrape(ctx, req);
    res.setHeader('Content-Type', Registry.PROMETHEUS_CONTENT_TYPE);
    res.send(cluster.isWorker ? await instanceMetricsFromMainProcess() : await Registry.merge(registries()).metrics());
  };
  app.get('/metrics', scrape);
  app.all('/metrics', (_req, _res, next) =>
    next(new AppError('method_not_allowed', 'Metrics are read with GET', { headers: { Allow: 'GET, HEAD' } })),
  );
}
