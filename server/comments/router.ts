import { initServer } from '@ts-rest/express';
import { commentsContract } from '@task-service/client';
import type { AppContext } from '../context.js';
import { principalOf } from '../http/principal.js';
import { serializeComment } from './serialize.js';
import { createComment, deleteComment, editComment, findVisibleComment, listComments } from './service.js';

export function commentsRouter(ctx: AppContext) {
  return initServer().router(commentsContract, {
    listForTask: async ({ params, query, req, res }) => ({
      status: 200,
      body: await listComments(ctx, principalOf(req), params.task_id, query, { req, res }),
    }),

    create: async ({ params, body, req, res }) => {
      const row = await createComment(ctx, principalOf(req), params.task_id, body.body);
      res.setHeader('Location', `/comments/${row.id}`);
      return { status: 201, body: serializeComment(row) };
    },

    get: async ({ params, req }) => ({
      status: 200,
      body: serializeComment(await findVisibleComment(ctx, principalOf(req), params.comment_id)),
    }),

    update: async ({ params, body, req }) => ({
      status: 200,
      body: serializeComment(await editComment(ctx, principalOf(req), params.comment_id, body.body)),
    }),

    remove: async ({ params, req }) => {
      await deleteComment(ctx, principalOf(req), params.comment_id);
      return { status: 204, body: undefined };
    },
  });
}
