import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UserSchema } from '../contract/users.js';
import { AdminEmailTakenError, ensureAdmin } from '../server/users/accounts.js';
import { startService, type TestService } from './support/app.js';
import { serverReachableTempDir } from './support/databases.js';
import { ROOT, runCli } from './support/processes.js';
import { login, registerUser, uniqueEmail } from './support/users.js';

describe('the configured administrator', () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startService();
  });
  afterAll(() => service.close());

  it('is created when missing, and left as it is when present', async () => {
    const email = uniqueEmail('admin');
    const created = await ensureAdmin(
      service.ctx,
      { email, password: 'first password', name: 'Ada' },
      { promoteExisting: false },
    );
    expect(created.role).toBe('admin');
    const again = await ensureAdmin(
      service.ctx,
      { email, password: 'another password', name: 'Ada' },
      { promoteExisting: false },
    );
    expect(again.id).toBe(created.id);
    await login(service, email, 'first password');
  });

  it('never promotes an account someone registered under that email first', async () => {
    const squatter = await registerUser(service);
    await expect(
      ensureAdmin(
        service.ctx,
        { email: squatter.email, password: 'operator password', name: 'Admin' },
        { promoteExisting: false },
      ),
    ).rejects.toThrow(AdminEmailTakenError);
    const me = await service.http.get('/auth/me').set('Authorization', squatter.auth).expect(200);
    expect(UserSchema.parse(me.body).role).toBe('user');
  });

  it('promotes an existing account when the operator asks for exactly that', async () => {
    const user = await registerUser(service);
    const promoted = await ensureAdmin(
      service.ctx,
      { email: user.email, password: 'unused here', name: 'X' },
      { promoteExisting: true },
    );
    expect(promoted).toMatchObject({ id: user.user.id, role: 'admin' });
  });
});

describe.runIf(process.env.TEST_DB === 'embedded')('npm run create-admin', () => {
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await serverReachableTempDir('create-admin-');
  });
  afterAll(() => rm(dataDir, { recursive: true, force: true }));

  it('creates an administrator on the embedded database, and no signing key', async () => {
    const env = { ADMIN_PASSWORD: 'operator password' };
    const { stdout } = await runCli('create-admin', ['Boss@Example.test', 'The Boss'], dataDir, env);
    expect(stdout).toMatch(/^administrator boss@example\.test \([0-9a-f-]{36}\) is present/);
    expect(await readdir(path.join(dataDir, 'keys'))).not.toContain('jwt-ed25519.pem');
    const again = await runCli('create-admin', ['boss@example.test'], dataDir, env);
    expect(again.stdout).toContain('boss@example.test');
  }, 60_000);

  it('reads a password typed on a terminal without echoing it', async () => {
    // `script` gives the command a terminal (a pseudo-terminal), as an operator's shell would.
    const command = `${process.execPath} dist/server/cli/create-admin.js typist@example.test`;
    const typed = spawn('script', ['-qfec', command, '/dev/null'], {
      cwd: ROOT,
      env: { ...process.env, DATA_DIR: dataDir, DATABASE_URL: '', ADMIN_PASSWORD: '' },
    });
    let screen = '';
    typed.stdout.on('data', (chunk: Buffer) => {
      screen += chunk.toString();
      if (screen.includes('Password') && !typed.stdin.writableEnded) typed.stdin.end('typed secret words\r');
    });
    const [code] = await once(typed, 'exit');
    expect(screen).toMatch(/administrator typist@example\.test \([0-9a-f-]{36}\) is present/);
    expect(screen).not.toContain('typed secret');
    expect(code).toBe(0);
  }, 120_000);

  it('refuses a malformed email with a usage line', async () => {
    await expect(runCli('create-admin', ['not-an-email'], dataDir)).rejects.toMatchObject({
      code: 2,
      stderr: expect.stringContaining('usage: npm run create-admin'),
    });
  });
});
