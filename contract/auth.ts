import { z } from 'zod';
import { c, commonErrors, EmailSchema, PasswordSchema, PersonNameSchema, ProblemSchema, type Named } from './common.js';
import { loginOnly, needs } from './scopes.js';
import { UserSchema } from './users.js';

export const RegisterSchema = z
  .object({ email: EmailSchema, password: PasswordSchema, name: PersonNameSchema })
  .strict();
export const LoginSchema = z
  .object({
    email: EmailSchema.describe('The email the account was registered with, in any case'),
    password: z.string().min(1).max(128).describe("The account's password"),
    deviceToken: z
      .string()
      .max(512)
      .optional()
      .describe(
        "The `deviceToken` of this client's last successful login to this account: its failed logins then count only against this device, so strangers locking the account do not lock it out",
      ),
  })
  .strict();
export const RefreshSchema = z
  .object({
    refreshToken: z
      .string()
      .min(1)
      .max(512)
      .describe('The refresh token of the latest answer from register, login or refresh'),
  })
  .strict();

const authResultSchema = z.object({
  user: UserSchema.describe('The account the tokens are for'),
  accessToken: z
    .string()
    .describe('A JWT to send as `Authorization: Bearer <accessToken>`; valid for `expiresIn` seconds'),
  refreshToken: z
    .string()
    .describe(
      'Opaque; exchange it at POST /auth/refresh for a new pair, whose refresh token replaces this one. Keep it secret, like a password',
    ),
  tokenType: z.literal('Bearer').describe('Always `Bearer`'),
  expiresIn: z.number().int().describe('Seconds until the access token expires (900 by default)'),
  deviceToken: z
    .string()
    .optional()
    .describe(
      'On a login answer: a signed token naming the account and this device; keep it and send it with the next login (up to 512 characters)',
    ),
});
export interface AuthResult extends z.output<typeof authResultSchema> {}
export const AuthResultSchema: Named<AuthResult> = authResultSchema;

export const authContract = c.router(
  {
    register: {
      method: 'POST',
      path: '/auth/register',
      body: RegisterSchema,
      responses: { 201: AuthResultSchema, 403: ProblemSchema, 409: ProblemSchema },
      summary: 'Create an account and a session',
      description:
        'Opens an account and its first session; the answer carries the access and refresh tokens. Self-registration can be switched off (403). An email already registered (any case) is 409 email_taken. Throttled per client address (429 with Retry-After).',
      metadata: { public: true },
    },
    login: {
      method: 'POST',
      path: '/auth/login',
      body: LoginSchema,
      responses: { 200: AuthResultSchema },
      summary: 'Start a session',
      description:
        'Checks the email and password and opens a new session. A wrong password and an unknown email give the same 401 invalid_credentials; repeated failures are throttled per account and address (429 with Retry-After).',
      metadata: { public: true },
    },
    refresh: {
      method: 'POST',
      path: '/auth/refresh',
      body: RefreshSchema,
      responses: { 200: AuthResultSchema },
      summary: 'Rotate the refresh token and get a new access token',
      description:
        'Exchanges the refresh token for a new access token and a new refresh token (rotation): keep the new one. Presenting a refresh token that was already rotated out ends the whole session (401); a session unused for SESSION_IDLE_DAYS has expired (401).',
      metadata: { public: true },
    },
    logout: {
      method: 'POST',
      metadata: loginOnly,
      path: '/auth/logout',
      body: c.noBody(),
      responses: { 204: c.noBody() },
      summary: 'Revoke the current session',
      description:
        'Ends the session the access token belongs to: its refresh token and every access token of the session are refused from now on, on every instance.',
    },
    me: {
      method: 'GET',
      metadata: needs('account:read'),
      path: '/auth/me',
      responses: { 200: UserSchema },
      summary: 'The authenticated user',
      description: 'The user the access token belongs to, with the role as it is now in the database.',
    },
  },
  { commonResponses: commonErrors },
);
