import { initServer } from '@ts-rest/express';
import { serviceContract } from '@task-service/client';
import type { AppContext } from '../context.js';
import { pendingMigrations, readMigrations } from '../db/migrate.js';

export function serviceRouter(ctx: AppContext) {
  const shipped = readMigrations();
  return initServer().router(serviceContract, {
    healthz: async () => ({ status: 200, body: { status: 'ok' } }),

    readyz: async ({ res }) => {
      try {
        const pending = await pendingMigrations(ctx.db.sql, await shipped);
        if (pending.length > 0) {
          res.setHeader('Retry-After', '5');
          return { status: 503, body: { status: 'unavailable', database: 'up', pendingMigrations: pending } };
        }
        return { status: 200, body: { status: 'ready', database: 'up', pendingMigrations: [] } };
      } catch (error) {
        ctx.logger.warn({ err: error }, 'readiness check: database unreachable');
        res.setHeader('Retry-After', '5');
        return { status: 503, body: { status: 'unavailable', database: 'down', pendingMigrations: [] } };
      }
    },

    jwks: async ({ res }) => {
      res.setHeader('Cache-Control', 'public, max-age=300');
      return { status: 200, body: { keys: [ctx.signingKey.publicJwk] } };
    },
  });
}
