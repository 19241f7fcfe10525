import { randomUUID } from 'node:crypto';
import { beforeAll } from 'vitest';
import { AuthResultSchema, type AuthResult } from '../../contract/auth.js';
import type { TestService } from './app.js';
import { makeAdmin } from './rows.js';

export interface TestUser extends AuthResult {
  email: string;
  password: string;
  /** The Authorization header value. */
  auth: string;
}

export const uniqueEmail = (prefix = 'user') => `${prefix}-${randomUUID().slice(0, 8)}@example.test`;

/** Registers a user over HTTP, the way a client would. */
export async function registerUser(
  service: TestService,
  options: { email?: string; name?: string; password?: string } = {},
): Promise<TestUser> {
  const email = options.email ?? uniqueEmail();
  const password = options.password ?? 'correct horse battery';
  const res = await service.http
    .post('/auth/register')
    .send({ email, password, name: options.name ?? 'Test User' })
    .expect(201);
  const result = AuthResultSchema.parse(res.body);
  return { ...result, email, password, auth: `Bearer ${result.accessToken}` };
}

/** POST /auth/login as a client sends it, for tests that look at the answer themselves. */
export const loginRequest = (service: TestService, email: string, password: string) =>
  service.http.post('/auth/login').send({ email, password });

/** Logs in (200 expected) and returns the new session with its Authorization header value. */
export async function login(
  service: TestService,
  email: string,
  password: string,
): Promise<AuthResult & { auth: string }> {
  const result = AuthResultSchema.parse((await loginRequest(service, email, password).expect(200)).body);
  return { ...result, auth: `Bearer ${result.accessToken}` };
}

/** Registers a user and makes them an admin directly in the database (the bootstrap path). */
export async function registerAdmin(service: TestService): Promise<TestUser> {
  const user = await registerUser(service, { email: uniqueEmail('admin') });
  await makeAdmin(service.ctx.db.sql, user.user.id);
  return { ...user, user: { ...user.user, role: 'admin' } };
}

/**
 * A user registered before the file's first test (after the service starts, when called after
 * serviceForFile): `const alice = userForFile(service);`. `admin`: made an admin as registerAdmin does.
 */
export function userForFile(
  service: TestService,
  options: { email?: string; name?: string; password?: string; admin?: boolean } = {},
): TestUser {
  let registered: TestUser | undefined;
  beforeAll(async () => {
    registered = options.admin ? await registerAdmin(service) : await registerUser(service, options);
  });
  const user = (): TestUser => {
    if (registered === undefined) throw new Error('The user registers in beforeAll');
    return registered;
  };
  return {
    get user() {
      return user().user;
    },
    get accessToken() {
      return user().accessToken;
    },
    get refreshToken() {
      return user().refreshToken;
    },
    get tokenType() {
      return user().tokenType;
    },
    get expiresIn() {
      return user().expiresIn;
    },
    get deviceToken() {
      return user().deviceToken;
    },
    get email() {
      return user().email;
    },
    get password() {
      return user().password;
    },
    get auth() {
      return user().auth;
    },
  };
}
