// Connections that hold a descriptor without using it are closed (found by an attack: 500 of 500
// silent sockets were still open after 130 s; slow bodies were cut only after 300 s).
import { once } from 'node:events';
import { rm } from 'node:fs/promises';
import type { Server } from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { AttachmentSchema } from '../contract/attachments.js';
import { ProblemSchema } from '../contract/common.js';
import { buildApp } from '../server/app.js';
import { loadConfig } from '../server/config.js';
import { applyConnectionTimeouts } from '../server/http/timeouts.js';
import { createHttpServer } from '../server/serve.js';
import { serviceForFile, startService, type TestService } from './support/app.js';
import { freshDatabase, serverReachableTempDir, type TestDatabase } from './support/databases.js';
import { killIfRunning, startServiceProcess, type ServiceProcess } from './support/processes.js';
import { createTask } from './support/tasks.js';
import { registerUser, type TestUser } from './support/users.js';

const IDLE_MS = 400;

/** Resolves true when the server closes the socket within `ms`, false if it is still open then. */
function closedWithin(socket: net.Socket, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    if (socket.destroyed) return resolve(true);
    const timer = setTimeout(() => resolve(false), ms);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

async function connect(port: number): Promise<net.Socket> {
  const socket = net.connect(port, '127.0.0.1');
  socket.on('error', () => undefined); // a reset by the server is what some tests expect
  socket.on('data', () => undefined);
  await once(socket, 'connect');
  return socket;
}

const portOf = (server: Server): number => {
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('expected a TCP address');
  return address.port;
};

describe('connection timeouts on the listening service', () => {
  let service: TestService;
  let server: Server;
  let port: number;
  beforeAll(async () => {
    service = await startService({
      HTTP_IDLE_TIMEOUT_MS: String(IDLE_MS),
      HTTP_HEADERS_TIMEOUT_MS: '5000',
      HTTP_REQUEST_TIMEOUT_MS: '10000',
    });
    // Built the way main.ts builds it.
    server = buildApp(service.ctx).listen(0, '127.0.0.1');
    applyConnectionTimeouts(server, service.ctx.config.httpTimeouts);
    await once(server, 'listening');
    port = portOf(server);
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await service.close();
  });

  it('closes every connection that sends nothing after the idle time', async () => {
    const sockets = await Promise.all(Array.from({ length: 100 }, () => connect(port)));
    const closed = await Promise.all(sockets.map((s) => closedWithin(s, IDLE_MS * 5)));
    expect(closed.filter(Boolean).length).toBe(100);
  });

  it('closes a connection that stops in the middle of its headers', async () => {
    const socket = await connect(port);
    socket.write('GET /healthz HTTP/1.1\r\nHost: localhost\r\n');
    expect(await closedWithin(socket, IDLE_MS * 5)).toBe(true);
  });

  it('cuts a body that stops arriving by inactivity, long before the request total', async () => {
    const socket = await connect(port);
    const started = Date.now();
    socket.write(
      'POST /auth/login HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"email":',
    );
    expect(await closedWithin(socket, IDLE_MS * 5)).toBe(true);
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('keeps a connection that keeps talking, and answers it', async () => {
    const socket = await connect(port);
    let answer = '';
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
    const request = 'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n';
    // Each byte comes well within the idle time: the connection lives longer than the idle time.
    for (const ch of request) {
      socket.write(ch);
      await new Promise((resolve) => setTimeout(resolve, IDLE_MS / 8));
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(answer).toMatch(/^HTTP\/1\.1 200/);
    socket.destroy();
  });
});

describe('a response the client stops reading', () => {
  const RESPONSE_IDLE_MS = 1500;
  // Larger than every buffer between the two ends on loopback, so a client that reads nothing stalls the download.
  const SIZE = 24 * 1024 * 1024;
  let service: TestService;
  let server: Server;
  let port: number;
  let owner: TestUser;
  let attachmentId: string;
  beforeAll(async () => {
    service = await startService({
      HTTP_IDLE_TIMEOUT_MS: String(IDLE_MS),
      HTTP_RESPONSE_IDLE_TIMEOUT_MS: String(RESPONSE_IDLE_MS),
      ATTACHMENT_MAX_BYTES: String(SIZE),
    });
    server = createHttpServer(service.ctx);
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = portOf(server);
    owner = await registerUser(service);
    const task = await createTask(service, owner);
    const uploaded = await service.http
      .post(`/tasks/${task.id}/attachments`)
      .set('Authorization', owner.auth)
      .attach('file', Buffer.alloc(SIZE, 7), { filename: 'big.bin', contentType: 'application/octet-stream' })
      .expect(201);
    attachmentId = AttachmentSchema.parse(uploaded.body).id;
  }, 60_000);
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await service.close();
  });

  /** Asks for the download, reads nothing for `pauseMs`, then reads to the end: how many body bytes came. */
  async function downloadPausing(pauseMs: number): Promise<number> {
    const socket = net.connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    await once(socket, 'connect');
    socket.pause();
    socket.write(
      `GET /attachments/${attachmentId}/content HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nAuthorization: ${owner.auth}\r\n\r\n`,
    );
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
    let received = 0;
    socket.on('data', (chunk: Buffer) => (received += chunk.length));
    socket.resume();
    await Promise.race([once(socket, 'close'), new Promise((resolve) => setTimeout(resolve, 10_000))]);
    socket.destroy();
    return received;
  }

  it('cuts a download to a client that reads nothing for HTTP_RESPONSE_IDLE_TIMEOUT_MS, and lets its socket go', async () => {
    const received = await downloadPausing(RESPONSE_IDLE_MS + 2 * IDLE_MS + 500);
    expect(received).toBeGreaterThan(0);
    expect(received).toBeLessThan(SIZE);
    const open = await new Promise<number>((resolve, reject) =>
      server.getConnections((error, count) => (error ? reject(error) : resolve(count))),
    );
    expect(open).toBe(0);
  });

  it('lets a client that pauses for less than that (longer than the idle time) read the whole download', async () => {
    const received = await downloadPausing(RESPONSE_IDLE_MS - 2 * IDLE_MS);
    expect(received).toBeGreaterThan(SIZE);
  });
});

describe('connections per client address', () => {
  const served = serviceForFile({ MAX_CONNECTIONS_PER_ADDRESS: '5' }, { listen: true });

  it('takes MAX_CONNECTIONS_PER_ADDRESS and HTTP_RESPONSE_IDLE_TIMEOUT_MS as positive integers (defaults 256 and 60 s)', () => {
    const defaults = loadConfig({});
    expect(defaults.maxConnectionsPerAddress).toBe(256);
    expect(defaults.httpTimeouts.responseIdleMs).toBe(60_000);
    for (const bad of [{ MAX_CONNECTIONS_PER_ADDRESS: '0' }, { HTTP_RESPONSE_IDLE_TIMEOUT_MS: 'soon' }]) {
      expect(() => loadConfig(bad)).toThrow(new RegExp(`^Invalid configuration: ${Object.keys(bad)[0]}`));
    }
  });

  it('holds at most MAX_CONNECTIONS_PER_ADDRESS connections of one address; one closing makes room', async () => {
    const port = Number(new URL(served.baseUrl).port);
    const held = await Promise.all(Array.from({ length: 5 }, () => connect(port)));
    const refused = await connect(port);
    expect(await closedWithin(refused, 1000)).toBe(true);
    expect((await Promise.all(held.map((s) => closedWithin(s, 200)))).filter(Boolean)).toEqual([]);
    held[0]?.destroy();
    await new Promise((resolve) => setTimeout(resolve, 100));
    const next = await connect(port);
    let answer = '';
    next.on('data', (chunk: Buffer) => (answer += chunk.toString()));
    next.write('GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n');
    await vi.waitFor(() => expect(answer).toMatch(/^HTTP\/1\.1 200/), { timeout: 2000 });
    for (const socket of [...held, next]) socket.destroy();
  });
});

// The process as an operator starts it, so main.ts is proven to apply the policy.
describe('connection timeouts in the service process', () => {
  let database: TestDatabase;
  let dataDir: string;
  let service: ServiceProcess | undefined;
  beforeAll(async () => {
    database = await freshDatabase();
    dataDir = await serverReachableTempDir('task-service-conn-');
    service = await startServiceProcess({
      DATABASE_URL: database.url,
      HTTP_IDLE_TIMEOUT_MS: String(IDLE_MS),
      DATA_DIR: dataDir,
    });
  }, 60_000);
  afterAll(async () => {
    killIfRunning(service);
    await service?.exited;
    await database.drop();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('closes silent connections after HTTP_IDLE_TIMEOUT_MS', async () => {
    const port = Number(new URL(service?.url ?? '').port);
    const sockets = await Promise.all(Array.from({ length: 50 }, () => connect(port)));
    const closed = await Promise.all(sockets.map((s) => closedWithin(s, IDLE_MS * 5)));
    expect(closed.filter(Boolean).length).toBe(50);
  });
});

describe("requests Node's parser refuses", () => {
  const served = serviceForFile({}, { listen: true });

  /** Sends `raw` and reads the whole answer (the server closes the connection after it). */
  async function answerTo(raw: string): Promise<{ head: string; body: unknown }> {
    const socket = await connect(Number(new URL(served.baseUrl).port));
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.write(raw);
    await once(socket, 'close');
    const [head = '', body = ''] = Buffer.concat(chunks).toString('utf8').split('\r\n\r\n');
    return { head, body: JSON.parse(body) };
  }

  it('answers a request line over 16 KiB with a whole problem+json 400, request id and instance included (found by the fuzzer)', async () => {
    const { head, body } = await answerTo(`GET /tasks?id=${'x'.repeat(20_000)} HTTP/1.1\r\nHost: localhost\r\n\r\n`);
    expect(head).toMatch(/^HTTP\/1\.1 400 /);
    expect(head).toMatch(/\r\nContent-Type: application\/problem\+json\r\n/i);
    const problem = ProblemSchema.strict().parse(body);
    expect(problem).toMatchObject({ status: 400, code: 'validation_failed', instance: '/tasks' });
    expect(head).toContain(`\r\nX-Request-Id: ${problem.requestId}\r\n`);
  });

  it('answers a malformed request line the same way', async () => {
    const { head, body } = await answerTo('GET /tasks HTTP/9.9 nonsense\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 400 /);
    expect(ProblemSchema.strict().parse(body)).toMatchObject({
      status: 400,
      code: 'validation_failed',
      detail: 'The request is not well-formed HTTP/1.1',
    });
  });
});
