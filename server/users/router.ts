import { initServer } from '@ts-rest/express';
import { usersContract } from '@task-service/client';
import type { AppContext } from '../context.js';
import { clientAddress, principalOf } from '../http/principal.js';
import { listTasks } from '../tasks/service.js';
import { createAccount } from './accounts.js';
import { serializeUser } from './serialize.js';
import { deleteUser, findVisibleUser, listUsers, patchUser, replaceUser, requireAdmin } from './service.js';

export function usersRouter(ctx: AppContext) {
  return initServer().router(usersContract, {
    list: async ({ query, req, res }) => ({
      status: 200,
      body: await listUsers(ctx, principalOf(req), query, { req, res }),
    }),

    get: async ({ params, req }) => ({
      status: 200,
      body: serializeUser(await findVisibleUser(ctx, principalOf(req), params.user_id)),
    }),

    listTasks: async ({ params, query, req, res }) => {
      const principal = principalOf(req);
      // Self or an admin (else 404), so the user's relation to a task is all that decides.
      const user = await findVisibleUser(ctx, principal, params.user_id);
      const kind = query.relation === 'any' ? 'either' : query.relation;
      return { status: 200, body: await listTasks(ctx, { kind, userId: user.id }, query, { req, res }) };
    },

    create: async ({ body, req, res }) => {
      requireAdmin(principalOf(req), 'create users');
      const user = await createAccount(ctx, body);
      res.setHeader('Location', `/users/${user.id}`);
      return { status: 201, body: serializeUser(user) };
    },

    replace: async ({ params, body, req }) => ({
      status: 200,
      body: serializeUser(await replaceUser(ctx, principalOf(req), params.user_id, body)),
    }),

    update: async ({ params, body, req }) => ({
      status: 200,
      body: serializeUser(await patchUser(ctx, principalOf(req), params.user_id, body, clientAddress(req))),
    }),

    remove: async ({ params, req }) => {
      await deleteUser(ctx, principalOf(req), params.user_id);
      return { status: 204, body: undefined };
    },
  });
}
