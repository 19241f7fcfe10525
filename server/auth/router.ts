import { initServer } from '@ts-rest/express';
import { authContract } from '@task-service/client';
import type { AppContext } from '../context.js';
import { tables } from '../db/query.js';
import { AppError, notFound } from '../http/errors.js';
import { clientAddress, principalOf } from '../http/principal.js';
import { createAccount } from '../users/accounts.js';
import { serializeUser, userColumns } from '../users/serialize.js';
import { logIn } from './credentials.js';
import { refreshSession, revokeSession, startSession } from './sessions.js';

export function authRouter(ctx: AppContext) {
  return initServer().router(authContract, {
    register: async ({ body, req, res }) => {
      if (!ctx.config.registrationEnabled)
        throw new AppError('forbidden', 'Self-registration is disabled on this service');
      await ctx.registrationThrottle.admit(clientAddress(req));
      const user = await createAccount(ctx, body);
      res.setHeader('Location', `/users/${user.id}`);
      return { status: 201, body: await startSession(ctx, user) };
    },

    login: async ({ body, req }) => ({
      status: 200,
      body: await logIn(ctx, {
        email: body.email,
        password: body.password,
        address: clientAddress(req),
        deviceToken: body.deviceToken,
      }),
    }),

    refresh: async ({ body }) => ({ status: 200, body: await refreshSession(ctx, body.refreshToken) }),

    logout: async ({ req }) => {
      await revokeSession(ctx, principalOf(req).sessionId);
      return { status: 204, body: undefined };
    },

    me: async ({ req }) => {
      const user = await ctx.db.sql.first(
        tables.selectFrom('users').select(userColumns).where('users.id', '=', principalOf(req).userId),
      );
      if (!user) throw notFound('user');
      return { status: 200, body: serializeUser(user) };
    },
  });
}
