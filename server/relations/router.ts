import { initServer } from '@ts-rest/express';
import { relationsContract } from '@task-service/client';
import type { AppContext } from '../context.js';
import { principalOf } from '../http/principal.js';
import { listRelations, relateTasks, unrelateTasks } from './service.js';

export function relationsRouter(ctx: AppContext) {
  return initServer().router(relationsContract, {
    list: async ({ params, req }) => ({
      status: 200,
      body: { items: await listRelations(ctx, principalOf(req), params.task_id) },
    }),

    create: async ({ params, body, req, res }) => {
      const { relation, created } = await relateTasks(ctx, principalOf(req), params.task_id, body);
      if (!created) return { status: 200, body: relation };
      // The new resource is the relation; it answers DELETE at this address.
      res.setHeader('Location', `/tasks/${params.task_id}/relations/${relation.type}/${relation.task.id}`);
      return { status: 201, body: relation };
    },

    remove: async ({ params, req }) => {
      await unrelateTasks(ctx, principalOf(req), params.task_id, params.type, params.other_id);
      return { status: 204, body: undefined };
    },
  });
}
