import { z } from 'zod';
import { c, ProblemSchema } from './common.js';

export const HealthSchema = z.object({ status: z.literal('ok').describe('Always `ok`: the process answers') });
export const ReadinessSchema = z.object({
  status: z.enum(['ready', 'unavailable']).describe('`ready` when the service can take traffic'),
  database: z.enum(['up', 'down']).describe('Whether the database answered'),
  pendingMigrations: z.array(z.string()).describe('Names of the migrations not yet applied; empty when up to date'),
});
export const JwksSchema = z.object({
  keys: z.array(z.record(z.unknown())).describe('Public keys as JWKs (RFC 7517), matched to a token by its `kid`'),
});

export const serviceContract = c.router({
  healthz: {
    method: 'GET',
    path: '/healthz',
    responses: { 200: HealthSchema },
    summary: 'The process is alive',
    description: 'Liveness: answers 200 while the process runs, without touching the database.',
    metadata: { public: true },
  },
  readyz: {
    method: 'GET',
    path: '/readyz',
    responses: { 200: ReadinessSchema, 503: ReadinessSchema },
    summary: 'The database is reachable and every migration is applied',
    description:
      "Readiness: 200 when the database answers and every migration is applied, else 503 with what is wrong. Use it as the load balancer's probe.",
    metadata: { public: true },
  },
  jwks: {
    method: 'GET',
    path: '/.well-known/jwks.json',
    responses: { 200: JwksSchema, 500: ProblemSchema },
    summary: 'Public keys that verify access tokens',
    description:
      'The public keys (JWK Set, RFC 7517) that verify access tokens, for services that check tokens themselves.',
    metadata: { public: true },
  },
});
