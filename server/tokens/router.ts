import { initServer } from '@ts-rest/express';
import { personalAccessTokensContract } from '@task-service/client';
import type { AppContext } from '../context.js';
import { principalOf } from '../http/principal.js';
import { serializeToken } from './serialize.js';
import { createToken, findVisibleToken, listTokens, revokeToken } from './service.js';

export function personalAccessTokensRouter(ctx: AppContext) {
  return initServer().router(personalAccessTokensContract, {
    create: async ({ body, req, res }) => {
      const created = await createToken(ctx, principalOf(req), body);
      res.setHeader('Location', `/tokens/${created.id}`);
      return { status: 201, body: created };
    },

    list: async ({ query, req }) => ({
      status: 200,
      body: { items: await listTokens(ctx, principalOf(req), query.userId) },
    }),

    get: async ({ params, req }) => ({
      status: 200,
      body: serializeToken(await findVisibleToken(ctx, principalOf(req), params.token_id)),
    }),

    remove: async ({ params, req }) => {
      await revokeToken(ctx, principalOf(req), params.token_id);
      return { status: 204, body: undefined };
    },
  });
}
