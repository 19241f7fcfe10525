import { initServer } from '@ts-rest/express';
import { webhooksContract } from '@task-service/client';
import type { AppContext } from '../context.js';
import { principalOf } from '../http/principal.js';
import { serializeDelivery, serializeWebhook } from './serialize.js';
import {
  createWebhook,
  deleteWebhook,
  findVisibleWebhook,
  listDeliveries,
  listWebhooks,
  retryDelivery,
  updateWebhook,
} from './service.js';

export function webhooksRouter(ctx: AppContext) {
  return initServer().router(webhooksContract, {
    create: async ({ body, req, res }) => {
      const webhook = await createWebhook(ctx, principalOf(req), body);
      res.setHeader('Location', `/webhooks/${webhook.id}`);
      return { status: 201, body: webhook };
    },
    list: async ({ query, req, res }) => ({
      status: 200,
      body: await listWebhooks(ctx, principalOf(req), query, { req, res }),
    }),
    get: async ({ params, req }) => ({
      status: 200,
      body: serializeWebhook(await findVisibleWebhook(ctx, principalOf(req), params.webhook_id)),
    }),
    update: async ({ params, body, req }) => ({
      status: 200,
      body: serializeWebhook(await updateWebhook(ctx, principalOf(req), params.webhook_id, body)),
    }),
    remove: async ({ params, req }) => {
      await deleteWebhook(ctx, principalOf(req), params.webhook_id);
      return { status: 204, body: undefined };
    },
    deliveries: async ({ params, query, req, res }) => ({
      status: 200,
      body: await listDeliveries(ctx, principalOf(req), params.webhook_id, query, { req, res }),
    }),
    retry: async ({ params, req }) => ({
      status: 202,
      body: serializeDelivery(await retryDelivery(ctx, principalOf(req), params.webhook_id, params.delivery_id)),
    }),
  });
}
