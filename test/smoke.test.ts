import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startService, type TestService } from './support/app.js';
import { registerUser } from './support/users.js';

let service: TestService;
beforeAll(async () => {
  service = await startService();
});
afterAll(() => service.close());

describe('smoke', () => {
  it('registers and reads me', async () => {
    const alice = await registerUser(service);
    const me = await service.http.get('/auth/me').set('Authorization', alice.auth).expect(200);
    expect(me.body.email).toBe(alice.email);
  });
});
