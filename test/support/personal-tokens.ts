import { CreatedPersonalAccessTokenSchema, type CreatedPersonalAccessToken, type Scope } from '../../contract/index.js';
import type { TestService } from './app.js';

/** Creates a personal access token over HTTP with a login's access token; `auth` is its Authorization header value. */
export async function createPersonalToken(
  service: TestService,
  owner: { auth: string },
  scopes: Scope[],
  name = 'test token',
): Promise<CreatedPersonalAccessToken & { auth: string }> {
  const res = await service.http.post('/tokens').set('Authorization', owner.auth).send({ name, scopes }).expect(201);
  const created = CreatedPersonalAccessTokenSchema.parse(res.body);
  return { ...created, auth: `Bearer ${created.token}` };
}
