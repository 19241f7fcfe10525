// What the stack baseline needs to know of the service, passed in its environment.
import { z } from 'zod';

/** One of the service's own statements, and which value goes in each of its parameters. */
const ServiceStatementSchema = z.object({ text: z.string(), parameters: z.array(z.enum(['taskId', 'userId'])) });
export type ServiceStatement = z.infer<typeof ServiceStatementSchema>;

export const StackConfigSchema = z.object({
  databaseUrl: z.string(),
  poolSize: z.number().int().positive(),
  jwk: z.object({ kty: z.string(), crv: z.string(), x: z.string() }),
  issuer: z.string(),
  audience: z.string(),
  storedAttachmentCount: z.boolean(),
  /**
   * The service's read of one task its caller may see (GET /tasks/{id}), as it sends it: a member's
   * (personal tasks and their projects' tasks) and an admin's.
   */
  visibleTaskRead: z.object({ member: ServiceStatementSchema, all: ServiceStatementSchema }),
  /** The Task as the API shows it, of the task row `t`: the service's own JSON (server/tasks/serialize.ts), without parameters. */
  taskJson: z.string(),
  /** The service's USER_MAX_TASKS, checked by POST /tasks. */
  maxTasksPerUser: z.number().int().positive(),
});
export type StackConfig = z.infer<typeof StackConfigSchema>;

export const STACK_CONFIG_VARIABLE = 'BENCH_STACK_CONFIG';
