import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuthResultSchema } from '../contract/auth.js';
import { UserSchema } from '../contract/users.js';
import { ensureAdmin } from '../server/users/accounts.js';
import { serviceForFile } from './support/app.js';
import { freshDatabase, serverReachableTempDir, type TestDatabase } from './support/databases.js';
import { builtEntry, ROOT, runCli, startServiceProcess, type ServiceProcess } from './support/processes.js';
import { login, registerUser, uniqueEmail } from './support/users.js';

describe('the configured administrator', () => {
  const service = serviceForFile();

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

  it('never promotes an account someone registered under that email first, and leaves it as it is', async () => {
    const squatter = await registerUser(service);
    const found = await ensureAdmin(
      service.ctx,
      { email: squatter.email, password: 'operator password', name: 'Admin' },
      { promoteExisting: false },
    );
    expect(found).toMatchObject({ id: squatter.user.id, role: 'user' });
    const me = await service.http.get('/auth/me').set('Authorization', squatter.auth).expect(200);
    expect(UserSchema.parse(me.body).role).toBe('user');
    await login(service, squatter.email, squatter.password); // its password too
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

describe('ADMIN_EMAIL across restarts', () => {
  const ADMIN = { email: 'configured-root@example.test', password: 'configured password' };
  let database: TestDatabase;
  let dataDir: string;
  let service: ServiceProcess | undefined;
  beforeAll(async () => {
    database = await freshDatabase();
    dataDir = await serverReachableTempDir('admin-email-');
  });
  afterAll(async () => {
    service?.child.kill('SIGKILL');
    await database.drop();
    await rm(dataDir, { recursive: true, force: true });
  });

  /** (Re)starts the service process with ADMIN_EMAIL set; it must start. */
  async function restart(): Promise<ServiceProcess> {
    if (service) {
      service.child.kill('SIGTERM');
      expect(await service.exited).toBe(0);
    }
    service = await startServiceProcess({
      DATABASE_URL: database.url,
      DATA_DIR: dataDir,
      ADMIN_EMAIL: ADMIN.email,
      ADMIN_PASSWORD: ADMIN.password,
    });
    return service;
  }

  async function signIn(url: string, email: string, password: string) {
    const res = await request(url).post('/auth/login').send({ email, password }).expect(200);
    const result = AuthResultSchema.parse(res.body);
    return { user: result.user, auth: `Bearer ${result.accessToken}` };
  }

  it('starts after that account is demoted (a warning) and after it is renamed (a new administrator)', async () => {
    let running = await restart();
    expect(running.stdout()).toMatch(/administrator from configuration is present/);
    const root = await signIn(running.url, ADMIN.email, ADMIN.password);
    // A second administrator demotes the configured one, over HTTP.
    const deputy = { email: uniqueEmail('deputy'), password: 'deputy password', name: 'Deputy', role: 'admin' };
    await request(running.url).post('/users').set('Authorization', root.auth).send(deputy).expect(201);
    const { auth } = await signIn(running.url, deputy.email, deputy.password);
    await request(running.url)
      .patch(`/users/${root.user.id}`)
      .set('Authorization', auth)
      .send({ role: 'user' })
      .expect(200);

    running = await restart();
    const warning =
      running
        .stdout()
        .split('\n')
        .find((line) => line.includes('not an administrator')) ?? '';
    expect(JSON.parse(warning)).toMatchObject({ level: 40, userId: root.user.id });
    const demoted = await request(running.url).get(`/users/${root.user.id}`).set('Authorization', auth).expect(200);
    expect(UserSchema.parse(demoted.body).role).toBe('user'); // left as it is

    // Renamed: no account has the email any more, so the next start creates that administrator.
    await request(running.url)
      .patch(`/users/${root.user.id}`)
      .set('Authorization', auth)
      .send({ email: uniqueEmail('former-root') })
      .expect(200);
    running = await restart();
    expect(running.stdout()).not.toMatch(/not an administrator/);
    const created = await signIn(running.url, ADMIN.email, ADMIN.password);
    expect(created.user).toMatchObject({ role: 'admin', email: ADMIN.email });
    expect(created.user.id).not.toBe(root.user.id);
  }, 60_000);
});

describe.runIf(process.env.TEST_DB === 'embedded')('npm run create-admin', () => {
  let dataDir: string;
  beforeAll(async () => {
    // A new data directory, kept: create-admin may be an operator's first command, and makes the
    // cluster and the schema itself.
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
    const command = `${process.execPath} ${builtEntry('server/cli/create-admin')} typist@example.test`;
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
