// Faults: the service process killed, its database gone, a shutdown under load.
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AuthResultSchema } from '../../contract/auth.js';
import { ProblemSchema } from '../../contract/common.js';
import { TaskSchema } from '../../contract/tasks.js';
import { freshDatabase, type TestDatabase } from '../support/databases.js';
import { killIfRunning, startServiceProcess, type ServiceProcess } from '../support/processes.js';

let database: TestDatabase;
let dataDir: string;
const started: ServiceProcess[] = [];
beforeEach(async () => {
  database = await freshDatabase();
  dataDir = await mkdtemp(path.join(tmpdir(), 'task-service-faults-'));
});
afterEach(async () => {
  started.splice(0).forEach(killIfRunning);
  await database.drop();
  await rm(dataDir, { recursive: true, force: true });
});

async function start(env: Record<string, string> = {}): Promise<ServiceProcess> {
  const service = await startServiceProcess({ DATABASE_URL: database.url, DATA_DIR: dataDir, ...env });
  started.push(service);
  return service;
}

async function register(url: string): Promise<string> {
  const res = await fetch(`${url}/auth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      email: `faults-${Date.now()}-${Math.random()}@example.test`,
      password: 'correct horse battery',
      name: 'Faults',
    }),
  });
  expect(res.status).toBe(201);
  return `Bearer ${AuthResultSchema.parse(await res.json()).accessToken}`;
}

const createTask = (url: string, auth: string, title: string) =>
  fetch(`${url}/tasks`, {
    method: 'POST',
    headers: { authorization: auth, 'content-type': 'application/json' },
    body: JSON.stringify({ title }),
  });

describe('kill -9 during a write load', () => {
  it('keeps every write it acknowledged with a 201', async () => {
    const first = await start();
    const auth = await register(first.url);
    const acknowledged: string[] = [];
    let stop = false;
    const writer = async (n: number) => {
      for (let i = 0; !stop; i++) {
        try {
          const res = await createTask(first.url, auth, `writer ${n} #${i}`);
          if (res.status === 201) acknowledged.push(TaskSchema.parse(await res.json()).id);
        } catch {
          return; // the process died under this request: not acknowledged
        }
      }
    };
    const writers = Array.from({ length: 8 }, (_, n) => writer(n));
    // Killed in the middle of the load, once it has run a while.
    while (acknowledged.length < 50) await new Promise((resolve) => setTimeout(resolve, 50));
    await new Promise((resolve) => setTimeout(resolve, 200 + Math.random() * 300));
    first.child.kill('SIGKILL');
    stop = true;
    await Promise.all(writers);
    await first.exited;

    const second = await start();
    const missing: string[] = [];
    for (const id of acknowledged) {
      const res = await fetch(`${second.url}/tasks/${id}`, { headers: { authorization: auth } });
      if (res.status !== 200) missing.push(id);
    }
    console.log(
      `kill -9: ${acknowledged.length} writes acknowledged before the kill, ${missing.length} missing after the restart`,
    );
    expect(missing).toEqual([]);
  }, 120_000);
});

/** A TCP relay to the database that can be cut and restored: the database "stopping" and "returning". */
async function databaseRelay(target: { host: string; port: number }) {
  const sockets = new Set<net.Socket>();
  let server: net.Server | undefined;
  let port = 0;
  const open = async () => {
    server = net.createServer((client) => {
      const upstream = net.connect(target.port, target.host);
      for (const s of [client, upstream]) {
        sockets.add(s);
        s.on('error', () => undefined);
        s.on('close', () => sockets.delete(s));
      }
      client.pipe(upstream).pipe(client);
    });
    server.listen(port, '127.0.0.1');
    await new Promise((resolve) => server?.once('listening', resolve));
    const address = server.address();
    if (address && typeof address === 'object') port = address.port;
  };
  await open();
  return {
    port: () => port,
    cut: async () => {
      await new Promise((resolve) => {
        server?.close(resolve);
        for (const s of sockets) s.destroy();
      });
    },
    restore: open,
  };
}

describe.skipIf(process.env.TEST_DB !== 'postgres')('the database stopped mid-load', () => {
  it('answers 503 problem+json with Retry-After without hanging or crashing, and recovers by itself', async () => {
    const dbUrl = new URL(database.url);
    const relay = await databaseRelay({ host: dbUrl.hostname, port: Number(dbUrl.port || 5432) });
    const viaRelay = new URL(database.url);
    viaRelay.hostname = '127.0.0.1';
    viaRelay.port = String(relay.port());
    const service = await start({ DATABASE_URL: viaRelay.toString() });
    const auth = await register(service.url);
    expect((await createTask(service.url, auth, 'before')).status).toBe(201);

    await relay.cut();
    const during = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const begun = Date.now();
        const res = await (i % 2
          ? createTask(service.url, auth, 'during')
          : fetch(`${service.url}/tasks`, { headers: { authorization: auth } }));
        return { res, body: await res.text(), ms: Date.now() - begun };
      }),
    );
    for (const { res, body, ms } of during) {
      expect(res.status).toBe(503);
      expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(ProblemSchema.parse(JSON.parse(body)).code).toBe('unavailable');
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(ms).toBeLessThan(10_000);
    }
    expect((await fetch(`${service.url}/readyz`)).status).toBe(503);
    expect((await fetch(`${service.url}/healthz`)).status).toBe(200); // the process is alive

    await relay.restore();
    const deadline = Date.now() + 15_000;
    let status = 0;
    while (Date.now() < deadline && status !== 201) {
      status = (await createTask(service.url, auth, 'after')).status;
      if (status !== 201) await new Promise((resolve) => setTimeout(resolve, 250));
    }
    expect(status).toBe(201);
    expect(service.child.exitCode).toBeNull();
    console.log(
      `database stopped: ${during.length} requests answered 503 in at most ${Math.max(...during.map((d) => d.ms))} ms; recovered after it returned`,
    );
    await relay.cut();
  }, 120_000);
});

describe('SIGTERM during slow requests and uploads', () => {
  it('lets the requests in flight finish and exits 0 within 10 s', async () => {
    const service = await start();
    const auth = await register(service.url);
    const task = TaskSchema.parse(await (await createTask(service.url, auth, 'for uploads')).json());
    const { port } = new URL(service.url);

    // Two uploads whose bodies arrive over ~2 s, and a JSON create that trickles in.
    const boundary = 'x-boundary';
    const file = Buffer.alloc(200_000, 1);
    const head = Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="slow.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`,
    );
    const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
    const multipart = Buffer.concat([head, file, tail]);
    const slowRequest = (pathname: string, type: string, body: Buffer) =>
      new Promise<number>((resolve, reject) => {
        const req = http.request(
          {
            host: '127.0.0.1',
            port,
            path: pathname,
            method: 'POST',
            headers: { authorization: auth, 'content-type': type, 'content-length': body.length },
          },
          (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          },
        );
        req.on('error', reject);
        const chunks = 10;
        const size = Math.ceil(body.length / chunks);
        let i = 0;
        const next = () => {
          req.write(body.subarray(i * size, (i + 1) * size));
          if (++i < chunks) setTimeout(next, 200);
          else req.end();
        };
        next();
      });
    const inFlight = [
      slowRequest(`/tasks/${task.id}/attachments`, `multipart/form-data; boundary=${boundary}`, multipart),
      slowRequest(`/tasks/${task.id}/attachments`, `multipart/form-data; boundary=${boundary}`, multipart),
      slowRequest('/tasks', 'application/json', Buffer.from(JSON.stringify({ title: 'slow create' }))),
    ];
    await new Promise((resolve) => setTimeout(resolve, 500));
    const signalled = Date.now();
    service.child.kill('SIGTERM');
    expect(await Promise.all(inFlight)).toEqual([201, 201, 201]);
    expect(await service.exited).toBe(0);
    const ms = Date.now() - signalled;
    expect(ms).toBeLessThan(10_000);
    console.log(`SIGTERM: 3 slow requests in flight finished with 201; exit 0 after ${ms} ms`);
  }, 60_000);
});
