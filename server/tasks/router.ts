import { initServer } from '@ts-rest/express';
import { tasksContract } from '@task-service/client';
import type { AppContext } from '../context.js';
import { principalOf } from '../http/principal.js';
import { entityTag, noneMatchHits } from '../http/etags.js';
import { visibleTasks } from './queries.js';
import { changeTask, createTask, deleteTask, findVisibleTask, listTasks } from './service.js';

export function tasksRouter(ctx: AppContext) {
  return initServer().router(tasksContract, {
    list: async ({ query, req, res }) => ({
      status: 200,
      body: await listTasks(ctx, visibleTasks(principalOf(req)), query, { req, res }),
    }),

    get: async ({ params, headers, req, res }) => {
      const task = await findVisibleTask(ctx, principalOf(req), params.task_id);
      const etag = entityTag(task.version);
      res.setHeader('ETag', etag);
      if (noneMatchHits(headers['if-none-match'], etag)) return { status: 304, body: undefined };
      return { status: 200, body: task };
    },

    create: async ({ body, req, res }) => {
      const task = await createTask(ctx, principalOf(req), body);
      res.setHeader('Location', `/tasks/${task.id}`);
      res.setHeader('ETag', entityTag(task.version));
      return { status: 201, body: task };
    },

    replace: async ({ params, headers, body, req, res }) => {
      const task = await changeTask(ctx, principalOf(req), params.task_id, headers['if-match'], body);
      res.setHeader('ETag', entityTag(task.version));
      return { status: 200, body: task };
    },

    update: async ({ params, headers, body, req, res }) => {
      const task = await changeTask(ctx, principalOf(req), params.task_id, headers['if-match'], body);
      res.setHeader('ETag', entityTag(task.version));
      return { status: 200, body: task };
    },

    remove: async ({ params, headers, req }) => {
      await deleteTask(ctx, principalOf(req), params.task_id, headers['if-match']);
      return { status: 204, body: undefined };
    },
  });
}
