import { initServer } from '@ts-rest/express';
import { activityContract } from '@task-service/client';
import type { AppContext } from '../context.js';
import { principalOf } from '../http/principal.js';
import { listActivity } from './service.js';

export function activityRouter(ctx: AppContext) {
  return initServer().router(activityContract, {
    listForTask: async ({ params, query, req, res }) => ({
      status: 200,
      body: await listActivity(ctx, principalOf(req), params.task_id, query, { req, res }),
    }),
  });
}
