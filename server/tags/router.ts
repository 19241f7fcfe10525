import { initServer } from '@ts-rest/express';
import { tagsContract } from '@task-service/client';
import type { AppContext } from '../context.js';
import { principalOf } from '../http/principal.js';
import { serializeTag } from './serialize.js';
import { changeTag, createTag, deleteTag, findVisibleTag, listTags } from './service.js';
import { addTagToTask, listTaskTags, removeTagFromTask } from './task-tags.js';

export function tagsRouter(ctx: AppContext) {
  return initServer().router(tagsContract, {
    list: async ({ query, req, res }) => ({
      status: 200,
      body: await listTags(ctx, principalOf(req), query, { req, res }),
    }),

    get: async ({ params, req }) => ({
      status: 200,
      body: serializeTag(await findVisibleTag(ctx, principalOf(req), params.tag_id)),
    }),

    create: async ({ body, req, res }) => {
      const tag = await createTag(ctx, principalOf(req), body);
      res.setHeader('Location', `/tags/${tag.id}`);
      return { status: 201, body: serializeTag(tag) };
    },

    update: async ({ params, body, req }) => ({
      status: 200,
      body: serializeTag(await changeTag(ctx, principalOf(req), params.tag_id, body)),
    }),

    remove: async ({ params, req }) => {
      await deleteTag(ctx, principalOf(req), params.tag_id);
      return { status: 204, body: undefined };
    },

    listForTask: async ({ params, req }) => {
      const tags = await listTaskTags(ctx, principalOf(req), params.task_id);
      return { status: 200, body: { items: tags.map(serializeTag) } };
    },

    addToTask: async ({ params, req, res }) => {
      const { tag, created } = await addTagToTask(ctx, principalOf(req), params.task_id, params.tag_id);
      if (!created) return { status: 200, body: serializeTag(tag) };
      // The new resource is the link; it answers DELETE at this address.
      res.setHeader('Location', `/tasks/${params.task_id.toLowerCase()}/tags/${tag.id}`);
      return { status: 201, body: serializeTag(tag) };
    },

    removeFromTask: async ({ params, req }) => {
      await removeTagFromTask(ctx, principalOf(req), params.task_id, params.tag_id);
      return { status: 204, body: undefined };
    },
  });
}
