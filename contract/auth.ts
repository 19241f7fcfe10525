import { z } from 'zod';
import { c, commonErrors, EmailSchema, PasswordSchema, PersonNameSchema, ProblemSchema } from './common.js';
import { UserSchema } from './users.js';

export const RegisterSchema = z.object({ email: EmailSchema, password: PasswordSchema, name: PersonNameSchema }).strict();
export const LoginSchema = z.object({ email: EmailSchema, password: z.string().min(1).max(128) }).strict();
export const RefreshSchema = z.object({ refreshToken: z.string().min(1).max(512) }).strict();

export const AuthResultSchema = z.object({
  user: UserSchema,
  accessToken: z.string(),
  refreshToken: z.string(),
  tokenType: z.literal('Bearer'),
  /** Seconds until the access token expires. */
  expiresIn: z.number().int(),
});
export type AuthResult = z.infer<typeof AuthResultSchema>;

export const authContract = c.router(
  {
    register: {
      method: 'POST',
      path: '/auth/register',
      body: RegisterSchema,
      responses: { 201: AuthResultSchema, 403: ProblemSchema, 409: ProblemSchema },
      summary: 'Create an account and a session',
      metadata: { public: true },
    },
    login: {
      method: 'POST',
      path: '/auth/login',
      body: LoginSchema,
      responses: { 200: AuthResultSchema },
      summary: 'Start a session',
      metadata: { public: true },
    },
    refresh: {
      method: 'POST',
      path: '/auth/refresh',
      body: RefreshSchema,
      responses: { 200: AuthResultSchema },
      summary: 'Rotate the refresh token and get a new access token',
      metadata: { public: true },
    },
    logout: {
      method: 'POST',
      path: '/auth/logout',
      body: c.noBody(),
      responses: { 204: c.noBody() },
      summary: 'Revoke the current session',
    },
    me: {
      method: 'GET',
      path: '/auth/me',
      responses: { 200: UserSchema },
      summary: 'The authenticated user',
    },
  },
  { commonResponses: commonErrors },
);
