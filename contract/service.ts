import { z } from 'zod';
import { c, ProblemSchema } from './common.js';

export const HealthSchema = z.object({ status: z.literal('ok') });
export const ReadinessSchema = z.object({
  status: z.enum(['ready', 'unavailable']),
  database: z.enum(['up', 'down']),
  pendingMigrations: z.array(z.string()),
});
export const JwksSchema = z.object({ keys: z.array(z.record(z.unknown())) });

export const serviceContract = c.router({
  healthz: {
    method: 'GET',
    path: '/healthz',
    responses: { 200: HealthSchema },
    summary: 'The process is alive',
    metadata: { public: true },
  },
  readyz: {
    method: 'GET',
    path: '/readyz',
    responses: { 200: ReadinessSchema, 503: ReadinessSchema },
    summary: 'The database is reachable and every migration is applied',
    metadata: { public: true },
  },
  jwks: {
    method: 'GET',
    path: '/.well-known/jwks.json',
    responses: { 200: JwksSchema, 500: ProblemSchema },
    summary: 'Public keys that verify access tokens',
    metadata: { public: true },
  },
});
