import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuthResultSchema } from '../contract/auth.js';

// The service as an operator runs it: a real process on the embedded database.
const ROOT = path.resolve(import.meta.dirname, '..');

/** `server/main.ts` in a process of its own, on the embedded database in `dataDir`. */
function spawnService(dataDir: string, env: Record<string, string> = {}) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'server/main.ts'], {
    cwd: ROOT,
    env: { ...process.env, DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', DATABASE_URL: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  // 'close' comes after the output streams end, so stderr is complete by then.
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  return { child, exited, stderr: () => stderr };
}

type Spawned = ReturnType<typeof spawnService>;

/** Spawns the service and waits until it says where it listens. */
function startProcess(dataDir: string): Promise<Spawned & { url: string }> {
  const spawned = spawnService(dataDir);
  return new Promise((resolve, reject) => {
    createInterface({ input: spawned.child.stdout }).on('line', (line) => {
      const match = /listening on (http:\/\/[^"]+)/.exec(line);
      if (match?.[1]) resolve({ ...spawned, url: match[1] });
    });
    void spawned.exited.then((code) => reject(new Error(`exited with ${code}: ${spawned.stderr()}`)));
  });
}

describe('the service process on the embedded database', () => {
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), 'task-service-process-'));
  });
  afterAll(() => rm(dataDir, { recursive: true, force: true }));

  it('starts, refuses a second process on the same data directory, stops cleanly and keeps its data', async () => {
    const first = await startProcess(dataDir);
    try {
      expect((await fetch(`${first.url}/readyz`)).status).toBe(200);
      const registered = await fetch(`${first.url}/auth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'keeper@example.test', password: 'long enough password', name: 'Keeper' }),
      });
      expect(registered.status).toBe(201);
      const { accessToken } = AuthResultSchema.parse(await registered.json());

      const second = spawnService(dataDir);
      expect(await second.exited).toBe(1);
      expect(second.stderr()).toContain('in use by another process');
      expect(second.stderr()).not.toMatch(/\n\s+at /); // a message, not a stack trace

      first.child.kill('SIGTERM');
      expect(await first.exited).toBe(0);

      // Same data directory again: the lock was released, the account and the signing key survived.
      const again = await startProcess(dataDir);
      try {
        const me = await fetch(`${again.url}/auth/me`, { headers: { authorization: `Bearer ${accessToken}` } });
        expect(me.status).toBe(200);
        const login = await fetch(`${again.url}/auth/login`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ email: 'keeper@example.test', password: 'long enough password' }),
        });
        expect(login.status).toBe(200);
      } finally {
        again.child.kill('SIGTERM');
        expect(await again.exited).toBe(0);
      }
    } finally {
      if (first.child.exitCode === null) first.child.kill('SIGKILL');
    }
  }, 120_000);

  it('refuses to start on a bad configuration value, naming it', async () => {
    const started = spawnService(dataDir, { PORT: 'eighty' });
    expect(await started.exited).toBe(1);
    expect(started.stderr()).toContain('PORT');
    expect(started.stderr()).toContain('Invalid configuration');
  }, 60_000);
});
