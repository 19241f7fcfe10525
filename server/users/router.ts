import { initServer } from '@ts-rest/express';
import { usersContract } from '../../contract/users.js';
import type { AppContext } from '../context.js';
import type { Prisma } from '../generated/prisma/client.js';
import { decodeCursor, toPage } from '../http/pagination.js';
import { clientAddress, principalOf } from '../http/principal.js';
import { listTasks } from '../tasks/service.js';
import { createAccount } from './accounts.js';
import { userFilters } from './queries.js';
import { serializeUser } from './serialize.js';
import { deleteUser, findVisibleUser, patchUser, replaceUser, requireAdmin } from './service.js';

const USER_SORT = 'id';

export function usersRouter(ctx: AppContext) {
  return initServer().router(usersContract, {
    // Oldest first: ids are UUIDv7, so id order is creation order.
    list: async ({ query, req, res }) => {
      requireAdmin(principalOf(req), 'list users');
      const cursor = decodeCursor(query.cursor, USER_SORT);
      const rows = await ctx.db.prisma.user.findMany({ where: { AND: userFilters(query, cursor) }, orderBy: { id: 'asc' }, take: query.limit + 1 });
      return { status: 200, body: toPage({ req, res }, rows, query.limit, (u) => ({ s: USER_SORT, v: null, id: u.id }), serializeUser) };
    },

    get: async ({ params, req }) => ({ status: 200, body: serializeUser(await findVisibleUser(ctx, principalOf(req), params.user_id)) }),

    listTasks: async ({ params, query, req, res }) => {
      const principal = principalOf(req);
      const user = await findVisibleUser(ctx, principal, params.user_id);
      const scope: Prisma.TaskWhereInput =
        query.relation === 'owner' ? { ownerId: user.id }
        : query.relation === 'assignee' ? { assigneeId: user.id }
        : { OR: [{ ownerId: user.id }, { assigneeId: user.id }] };
      return { status: 200, body: await listTasks(ctx, principal, query, scope, { req, res }) };
    },

    create: async ({ body, req, res }) => {
      requireAdmin(principalOf(req), 'create users');
      const user = await createAccount(ctx, body);
      res.setHeader('Location', `/users/${user.id}`);
      return { status: 201, body: serializeUser(user) };
    },

    replace: async ({ params, body, req }) => ({ status: 200, body: serializeUser(await replaceUser(ctx, principalOf(req), params.user_id, body)) }),

    update: async ({ params, body, req }) => ({ status: 200, body: serializeUser(await patchUser(ctx, principalOf(req), params.user_id, body, clientAddress(req))) }),

    remove: async ({ params, req }) => {
      await deleteUser(ctx, principalOf(req), params.user_id);
      return { status: 204, body: undefined };
    },
  });
}
