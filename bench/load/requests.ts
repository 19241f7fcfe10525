// Turns a serialisable request description into autocannon requests (run in the load generator).
import { randomBytes } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type autocannon from 'autocannon';
import type { LoadBody, LoadSpecSchema } from './spec.js';
import type { z } from 'zod';

type Requests = z.output<typeof LoadSpecSchema>['requests'];

const BOUNDARY = 'bench-boundary-7f3a91c2';

function bodyOf(body: LoadBody): { payload: Buffer; contentType: string } {
  if (body.kind === 'json') return { payload: Buffer.from(body.value), contentType: 'application/json' };
  const head = `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="bench.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`;
  const payload = Buffer.concat([Buffer.from(head), randomBytes(body.bytes), Buffer.from(`\r\n--${BOUNDARY}--\r\n`)]);
  return { payload, contentType: `multipart/form-data; boundary=${BOUNDARY}` };
}

function headerValue(name: string, headers: IncomingHttpHeaders = {}): string | undefined {
  const key = Object.keys(headers).find((k) => k.toLowerCase() === name);
  const value = key === undefined ? undefined : headers[key];
  return Array.isArray(value) ? value[0] : value;
}

function rotating(spec: Extract<Requests, { kind: 'rotate' }>): autocannon.Request {
  const bodies = spec.bodies.map(bodyOf);
  let next = 0;
  return {
    method: spec.method,
    setupRequest: (request) => {
      const n = next++;
      const path = spec.paths[n % spec.paths.length];
      const body = bodies.length ? bodies[n % bodies.length] : undefined;
      const headers = { ...spec.headers, ...(body && { 'content-type': body.contentType }) };
      return { ...request, path, headers, body: body?.payload };
    },
  };
}

const draw = (n: number): number => Math.floor(Math.random() * n);

function spreading(spec: Extract<Requests, { kind: 'spread' }>): autocannon.Request {
  const bodies = spec.bodies.map(bodyOf);
  let next = 0;
  return {
    method: spec.method,
    setupRequest: (request) => {
      const user = spec.users[draw(spec.users.length)];
      if (!user) throw new Error('no users to send as');
      const path = user.paths[draw(user.paths.length)];
      const body = bodies.length ? bodies[next++ % bodies.length] : undefined;
      const headers = { ...user.headers, ...(body && { 'content-type': body.contentType }) };
      return { ...request, path, headers, body: body?.payload };
    },
  };
}

/** In-flight requests hold distinct tasks, drawn at random; a task goes back to the idle ones with its new version. */
function patching(spec: Extract<Requests, { kind: 'patch' }>): autocannon.Request {
  const idle = spec.tasks.map((task) => ({ ...task }));
  const held = new WeakMap<object, { id: string; version: number; user: number }>();
  let change = 0;
  const load = randomBytes(4).toString('hex');
  return {
    method: 'PATCH',
    setupRequest: (request, context) => {
      const at = draw(idle.length);
      const task = idle[at];
      if (!task) throw new Error('more connections than tasks to patch');
      // Swap-remove: the drawn task leaves the idle ones in constant time.
      const last = idle.pop();
      if (last && last !== task) idle[at] = last;
      held.set(context, task);
      // A title no write has set before: every request changes its task (none is a no-op answered as it is).
      const body = JSON.stringify({ title: `Patched ${load}-${change++}` });
      const headers = {
        ...spec.users[task.user]?.headers,
        'content-type': 'application/json',
        'if-match': `"${task.version}"`,
      };
      return { ...request, path: `/tasks/${task.id}`, headers, body };
    },
    onResponse: (status, _body, context, headers) => {
      const task = held.get(context);
      if (!task) return;
      held.delete(context);
      const etag = /^"(\d+)"$/.exec(headerValue('etag', headers) ?? '');
      // Without a new ETag (an error answer) the task's version is unknown: it stays out of the queue.
      if (status === 200 && etag?.[1]) idle.push({ ...task, version: Number(etag[1]) });
    },
  };
}

export function autocannonRequests(spec: Requests): autocannon.Request[] {
  if (spec.kind === 'rotate') return [rotating(spec)];
  return [spec.kind === 'spread' ? spreading(spec) : patching(spec)];
}
