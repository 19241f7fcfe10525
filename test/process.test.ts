import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// The service as an operator runs it: a real process on the embedded database.
const ROOT = path.resolve(import.meta.dirname, '..');

interface Started {
  child: ChildProcess;
  url: string;
  stderr: () => string;
}

function startProcess(dataDir: string, env: Record<string, string> = {}): Promise<Started> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'server/main.ts'], {
    cwd: ROOT,
    env: { ...process.env, DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', DATABASE_URL: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    lines.on('line', (line) => {
      const match = /listening on (http:\/\/[^"]+)/.exec(line);
      if (match?.[1]) resolve({ child, url: match[1], stderr: () => stderr });
    });
    child.on('exit', (code) => reject(new Error(`exited with ${code}: ${stderr}`)));
  });
}

async function exitOf(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null) return child.exitCode;
  const [code] = await once(child, 'exit');
  return code as number | null;
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
      const { accessToken } = (await registered.json()) as { accessToken: string };

      const second = spawn(process.execPath, ['--import', 'tsx', 'server/main.ts'], {
        cwd: ROOT,
        env: { ...process.env, DATA_DIR: dataDir, PORT: '0', DATABASE_URL: '' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let secondErr = '';
      second.stderr.on('data', (chunk: Buffer) => (secondErr += chunk.toString()));
      expect(await exitOf(second)).toBe(1);
      expect(secondErr).toContain('in use by another process');
      expect(secondErr).not.toMatch(/\n\s+at /); // a message, not a stack trace

      first.child.kill('SIGTERM');
      expect(await exitOf(first.child)).toBe(0);

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
        expect(await exitOf(again.child)).toBe(0);
      }
    } finally {
      if (first.child.exitCode === null) first.child.kill('SIGKILL');
    }
  }, 120_000);

  it('refuses to start on a bad configuration value, naming it', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'server/main.ts'], {
      cwd: ROOT,
      env: { ...process.env, DATA_DIR: dataDir, PORT: 'eighty', DATABASE_URL: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    expect(await exitOf(child)).toBe(1);
    expect(stderr).toContain('PORT');
    expect(stderr).toContain('Invalid configuration');
  }, 60_000);
});
