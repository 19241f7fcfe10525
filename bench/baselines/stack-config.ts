// What the stack baseline needs to know of the service, passed in its environment.
import { z } from 'zod';

export const StackConfigSchema = z.object({
  databaseUrl: z.string(),
  poolSize: z.number().int().positive(),
  jwk: z.object({ kty: z.string(), crv: z.string(), x: z.string() }),
  issuer: z.string(),
  audience: z.string(),
  storedAttachmentCount: z.boolean(),
  /** The service's USER_MAX_TASKS, checked by POST /tasks. */
  maxTasksPerUser: z.number().int().positive(),
});
export type StackConfig = z.infer<typeof StackConfigSchema>;

export const STACK_CONFIG_VARIABLE = 'BENCH_STACK_CONFIG';
