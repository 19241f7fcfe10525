import { randomBytes, randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { mkdir, readdir, rm, utimes, writeFile } from 'node:fs/promises';
import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { AttachmentSchema, type Attachment } from '../contract/attachments.js';
import { listOf, ProblemSchema } from '../contract/common.js';
import type { Task } from '../contract/tasks.js';
import { buildApp } from '../server/app.js';
import { sweepOrphans, ORPHAN_GRACE_MS } from '../server/attachments/sweep.js';
import { tables } from '../server/db/query.js';
import { startService, type TestService } from './support/app.js';
import { binary, sha256 } from './support/binary.js';
import { startObjectStore, type TestObjectStore } from './support/object-store.js';
import { registerAdmin, registerUser, type TestUser } from './support/users.js';
import { expectProblem } from './support/problems.js';
import { countAttachments } from './support/rows.js';
import { createTask, getTask } from './support/tasks.js';

// A full disk, on demand: a partial attachment file opened while `fullDisk.on` fails its writes
// with ENOSPC, as the filesystem does when it has no room left.
const fullDisk = vi.hoisted(() => ({ on: false }));
vi.mock('node:fs/promises', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs/promises')>();
  const open: typeof fs.open = async (file, flags, mode) => {
    const handle = await fs.open(file, flags, mode);
    if (fullDisk.on && String(file).endsWith('.partial')) {
      const noSpace = Object.assign(new Error('ENOSPC: no space left on device, write'), {
        code: 'ENOSPC',
        errno: -28,
        syscall: 'write',
      });
      vi.spyOn(handle, 'write').mockRejectedValue(noSpace);
    }
    return handle;
  };
  return { ...fs, default: { ...fs, open }, open };
});

const MAX_BYTES = 2 * 1024 * 1024;
const MAX_PER_TASK = 8;
const AttachmentListSchema = listOf(AttachmentSchema);
// A 1×1 PNG.
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
  'base64',
);

let service: TestService;
let alice: TestUser;
let bob: TestUser;
let carol: TestUser;
let admin: TestUser;
let server: http.Server;
let port: number;

// The same tests run with the bytes in an S3-compatible store (test/attachments-s3.test.ts).
const backend = process.env.TEST_ATTACHMENT_STORAGE === 's3' ? 's3' : 'fs';
let objectStore: TestObjectStore | undefined;
/** Writes that reached the storage (the S3 store shows no trace of an upload under way). */
let writesBegun = 0;

beforeAll(async () => {
  objectStore = backend === 's3' ? await startObjectStore() : undefined;
  service = await startService({
    ATTACHMENT_MAX_BYTES: String(MAX_BYTES),
    ATTACHMENTS_MAX_PER_TASK: String(MAX_PER_TASK),
    ...objectStore?.env,
  });
  const storage = service.ctx.attachmentStorage;
  service.ctx.attachmentStorage = {
    ...storage,
    write: (source, options) => {
      writesBegun++;
      return storage.write(source, options);
    },
  };
  [alice, bob, carol, admin] = await Promise.all([
    registerUser(service, { name: 'Alice' }),
    registerUser(service, { name: 'Bob' }),
    registerUser(service, { name: 'Carol' }),
    registerAdmin(service),
  ]);
  server = buildApp(service.ctx).listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  port = z.custom<AddressInfo>((a) => typeof a === 'object' && a !== null).parse(server.address()).port;
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  await service.ctx.attachmentStorage.close();
  await service.close();
  await objectStore?.close();
});

const storageDir = (sub: 'objects' | 'tmp') => path.join(service.ctx.config.dataDir, 'attachments', sub);
async function storedObjects(): Promise<string[]> {
  const keys: string[] = [];
  for await (const entry of service.ctx.attachmentStorage.list()) keys.push(entry.key);
  return keys;
}
const partialWrites = () => readdir(storageDir('tmp'));
/** An upload is under way: its partial file exists (fs), or its write began (s3). */
const uploadStarted = async (writesBefore: number) =>
  backend === 'fs' ? (await partialWrites()).length > 0 : writesBegun > writesBefore;
/** No partial write is left. An S3 upload cannot be listed on s3rver; test/storage.test.ts shows a failed one keeps nothing. */
const noPartialWrites = async () => backend === 's3' || (await partialWrites()).length === 0;

/** Waits until `check` holds, checking every 25 ms. */
async function eventuallyTrue(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((resolve) => setTimeout(resolve, 25));
}

/** Waits until `check` holds (the server finishes its clean-up after the client has gone). */
async function eventually(check: () => Promise<boolean>, what: string): Promise<void> {
  for (let attempt = 0; attempt < 200; attempt++) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`never happened: ${what}`);
}

const post = (user: TestUser, taskId: string) =>
  service.http.post(`/tasks/${taskId}/attachments`).set('Authorization', user.auth);

async function upload(
  user: TestUser,
  taskId: string,
  bytes: Buffer,
  filename = 'file.bin',
  contentType = 'application/octet-stream',
): Promise<Attachment> {
  const res = await post(user, taskId).attach('file', bytes, { filename, contentType });
  expect(res.status).toBe(201);
  const attachment = AttachmentSchema.parse(res.body);
  expect(res.headers.location).toBe(`/attachments/${attachment.id}`);
  return attachment;
}

interface Part {
  name: string;
  /** Raw header parameters after the name, e.g. `filename="a.txt"`. */
  params?: string;
  type?: string;
  data: Buffer | string;
}

/** A multipart/form-data body built byte by byte, for what form libraries refuse to send. */
function multipart(parts: Part[], boundary = `----test${randomUUID()}`) {
  const chunks: Buffer[] = [];
  for (const part of parts) {
    const disposition = `Content-Disposition: form-data; name="${part.name}"${part.params ? `; ${part.params}` : ''}`;
    chunks.push(
      Buffer.from(
        `--${boundary}\r\n${disposition}\r\n${part.type ? `Content-Type: ${part.type}\r\n` : ''}\r\n`,
        'utf8',
      ),
    );
    chunks.push(Buffer.isBuffer(part.data) ? part.data : Buffer.from(part.data));
    chunks.push(Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

function sendMultipart(user: TestUser, taskId: string, parts: Part[]) {
  const { body, contentType } = multipart(parts);
  return post(user, taskId).set('Content-Type', contentType).send(body);
}

/** Uploads to a task of its own a file part with the given name parameters. */
async function uploadNamed(params: string): Promise<Attachment> {
  const res = await sendMultipart(alice, (await createTask(service, alice)).id, [
    { name: 'file', params, type: 'text/plain', data: 'hello' },
  ]);
  expect(res.status).toBe(201);
  return AttachmentSchema.parse(res.body);
}

/** An upload over a raw connection, for what a client library will not do: stop half-way, or lie about the length. */
function rawUpload(taskId: string, contentType: string, contentLength: number) {
  const req = http.request({
    host: '127.0.0.1',
    port,
    method: 'POST',
    path: `/tasks/${taskId}/attachments`,
    headers: { Authorization: alice.auth, 'Content-Type': contentType, 'Content-Length': String(contentLength) },
  });
  const answer = new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }>((resolve, reject) => {
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString() }),
      );
    });
    req.on('error', reject);
  });
  return { req, answer };
}

async function download(user: TestUser, id: string, headers: Record<string, string> = {}) {
  const res = await service.http
    .get(`/attachments/${id}/content`)
    .set('Authorization', user.auth)
    .set(headers)
    .buffer(true)
    .parse(binary);
  return { status: res.status, headers: res.headers, bytes: z.instanceof(Buffer).parse(res.body), res };
}

async function listFor(user: TestUser, taskId: string): Promise<Attachment[]> {
  return AttachmentListSchema.parse(
    (await service.http.get(`/tasks/${taskId}/attachments`).set('Authorization', user.auth).expect(200)).body,
  ).items;
}

describe('upload and download', () => {
  it(`keeps the bytes in the configured storage (${backend})`, async () => {
    const task = await createTask(service, alice);
    await upload(alice, task.id, Buffer.from('where am I'));
    expect((await readdir(service.ctx.config.dataDir)).includes('attachments')).toBe(backend === 'fs');
  });

  it('round-trips a 1 MiB random binary byte for byte, with its metadata', async () => {
    const task = await createTask(service, alice);
    // A fixed prefix, so that random bytes cannot happen to look like a known format.
    const bytes = Buffer.concat([Buffer.from('not a known format'), randomBytes(1024 * 1024)]);
    const attachment = await upload(alice, task.id, bytes, 'data.bin');
    expect(attachment).toMatchObject({
      taskId: task.id,
      filename: 'data.bin',
      contentType: 'application/octet-stream',
      size: bytes.length,
      sha256: sha256(bytes),
      uploadedBy: alice.user.id,
    });

    const got = await download(alice, attachment.id);
    expect(got.status).toBe(200);
    expect(got.bytes.equals(bytes)).toBe(true);
    expect(got.headers['content-length']).toBe(String(bytes.length));
    expect(got.headers['content-type']).toBe('application/octet-stream');
    expect(got.headers.etag).toBe(`"${sha256(bytes)}"`);
    expect(got.headers['x-content-type-options']).toBe('nosniff');
    expect(got.headers['accept-ranges']).toBe('bytes');
    expect(got.headers['content-disposition']).toBe(`attachment; filename="data.bin"; filename*=UTF-8''data.bin`);

    const meta = await service.http.get(`/attachments/${attachment.id}`).set('Authorization', alice.auth).expect(200);
    expect(AttachmentSchema.parse(meta.body)).toEqual(attachment);
    const after = await getTask(service, alice, task.id);
    expect(after.attachmentCount).toBe(1);
    // attachmentCount is part of the task, so the task's version (its ETag) moved on.
    expect(after.version).toBe(task.version + 1);
  });

  it('takes the content type from the bytes: a PNG declared as text/plain is image/png', async () => {
    const task = await createTask(service, alice);
    const attachment = await upload(alice, task.id, PNG, 'pixel.txt', 'text/plain');
    expect(attachment.contentType).toBe('image/png');
    const got = await download(alice, attachment.id);
    expect(got.bytes.equals(PNG)).toBe(true);
    expect(got.headers['content-type']).toBe('image/png');
  });

  it('keeps a declared type when the bytes are not recognisable, else application/octet-stream', async () => {
    const task = await createTask(service, alice);
    expect((await upload(alice, task.id, Buffer.from('plain words'), 'notes.txt', 'text/plain')).contentType).toBe(
      'text/plain',
    );
    expect((await upload(alice, task.id, Buffer.from('{"a":1}'), 'a.json', 'application/json')).contentType).toBe(
      'application/json',
    );
    const odd = await sendMultipart(alice, task.id, [
      { name: 'file', params: 'filename="x"', type: 'application/octet-stream', data: 'x' },
    ]);
    expect(AttachmentSchema.parse(odd.body).contentType).toBe('application/octet-stream');
  });

  it('stores an empty file', async () => {
    const task = await createTask(service, alice);
    const attachment = await upload(alice, task.id, Buffer.alloc(0), 'empty.txt', 'text/plain');
    expect(attachment).toMatchObject({ size: 0, sha256: sha256(Buffer.alloc(0)) });
    const got = await download(alice, attachment.id);
    expect(got.status).toBe(200);
    expect(got.bytes.length).toBe(0);
  });

  it('lists a task’s attachments oldest first', async () => {
    const task = await createTask(service, alice);
    const first = await upload(alice, task.id, Buffer.from('1'), 'one.txt');
    const second = await upload(alice, task.id, Buffer.from('2'), 'two.txt');
    expect((await listFor(alice, task.id)).map((a) => a.id)).toEqual([first.id, second.id]);
    expect(await listFor(alice, (await createTask(service, alice)).id)).toEqual([]);
  });

  it('answers 304 to If-None-Match with the ETag', async () => {
    const task = await createTask(service, alice);
    const attachment = await upload(alice, task.id, Buffer.from('cache me'));
    const etag = `"${attachment.sha256}"`;
    for (const header of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
      const res = await service.http
        .get(`/attachments/${attachment.id}/content`)
        .set('Authorization', alice.auth)
        .set('If-None-Match', header);
      expect(res.status).toBe(304);
      expect(res.headers.etag).toBe(etag);
    }
    expect((await download(alice, attachment.id, { 'If-None-Match': '"other"' })).status).toBe(200);
  });
});

describe('range requests', () => {
  const bytes = Buffer.from(Array.from({ length: 1000 }, (_, i) => i % 251));
  let attachment: Attachment;
  beforeAll(async () => {
    attachment = await upload(alice, (await createTask(service, alice)).id, bytes, 'ranged.bin');
  });

  it.each([
    ['bytes=0-99', 0, 99],
    ['bytes=900-', 900, 999],
    ['bytes=-100', 900, 999],
    ['bytes=990-5000', 990, 999],
    ['bytes=-5000', 0, 999],
    ['bytes=500-500', 500, 500],
  ])('serves %s as 206', async (range, start, end) => {
    const got = await download(alice, attachment.id, { Range: range });
    expect(got.status).toBe(206);
    expect(got.headers['content-range']).toBe(`bytes ${start}-${end}/1000`);
    expect(got.headers['content-length']).toBe(String(end - start + 1));
    expect(got.bytes.equals(bytes.subarray(start, end + 1))).toBe(true);
  });

  it.each(['bytes=1000-', 'bytes=5000-6000', 'bytes=-0'])('answers %s with 416 and the size', async (range) => {
    const res = await service.http
      .get(`/attachments/${attachment.id}/content`)
      .set('Authorization', alice.auth)
      .set('Range', range);
    expectProblem(res, 416, 'range_not_satisfiable');
    expect(res.headers['content-range']).toBe('bytes */1000');
  });

  it.each(['bytes=0-1,5-6', 'bytes=5-2', 'items=0-1', 'bytes=x-y'])(
    'serves the whole content for %s',
    async (range) => {
      const got = await download(alice, attachment.id, { Range: range });
      expect(got.status).toBe(200);
      expect(got.bytes.equals(bytes)).toBe(true);
    },
  );

  it('answers HEAD with the headers of GET and no body, without reading the stored bytes', async () => {
    const open = vi.spyOn(service.ctx.attachmentStorage, 'open');
    try {
      const head = (headers: Record<string, string> = {}) =>
        fetch(`http://127.0.0.1:${port}/attachments/${attachment.id}/content`, {
          method: 'HEAD',
          headers: { Authorization: alice.auth, ...headers },
        });
      const whole = await head();
      expect(whole.status).toBe(200);
      expect(whole.headers.get('content-length')).toBe('1000');
      expect(whole.headers.get('etag')).toBe(`"${attachment.sha256}"`);
      expect(whole.headers.get('content-disposition')).toContain('ranged.bin');
      expect((await whole.arrayBuffer()).byteLength).toBe(0);
      const part = await head({ Range: 'bytes=0-9' });
      expect(part.status).toBe(206);
      expect(part.headers.get('content-length')).toBe('10');
      expect(part.headers.get('content-range')).toBe('bytes 0-9/1000');
      expect(open).not.toHaveBeenCalled();
    } finally {
      open.mockRestore();
    }
  });

  it('honours If-Range only when it names the current ETag', async () => {
    expect(
      (await download(alice, attachment.id, { Range: 'bytes=0-9', 'If-Range': `"${attachment.sha256}"` })).status,
    ).toBe(206);
    const stale = await download(alice, attachment.id, { Range: 'bytes=0-9', 'If-Range': '"stale"' });
    expect(stale.status).toBe(200);
    expect(stale.bytes.equals(bytes)).toBe(true);
  });
});

describe('file names', () => {
  it.each([
    ['filename="../../etc/passwd"', 'passwd'],
    ['filename="..\\\\..\\\\windows\\\\evil.bat"', 'evil.bat'],
    ['filename="C:\\\\Users\\\\me\\\\report.pdf"', 'report.pdf'],
    ['filename="  spaced.txt  "', 'spaced.txt'],
    ['filename="new%0Aline%0D.txt"', 'newline.txt'],
    ['filename="quote%22d.txt"', 'quote"d.txt'],
    [`filename*=UTF-8''bell%07esc%1B%5B31m%09tab%7F.txt`, 'bellesc[31mtab.txt'],
    ['filename="txt.\u202eexe"', 'txt.exe'],
    ['filename="  %0A  "', 'file'],
    [`filename*=UTF-8''%01%02`, 'file'],
  ])('stores %s as %j', async (params, expected) => {
    expect((await uploadNamed(params)).filename).toBe(expected);
  });

  it('refuses raw control characters in the part header, which HTTP does not allow there', async () => {
    const res = await sendMultipart(alice, (await createTask(service, alice)).id, [
      { name: 'file', params: 'filename="bell\x07.txt"', data: 'x' },
    ]);
    expectProblem(res, 400, 'validation_failed');
  });

  it('keeps non-ASCII names sent as raw UTF-8 or as filename*', async () => {
    const name = 'résumé 日本語 😀.pdf';
    expect((await uploadNamed(`filename="${name}"`)).filename).toBe(name);
    const extended = await uploadNamed(`filename*=UTF-8''${encodeURIComponent(name)}`);
    expect(extended.filename).toBe(name);

    const got = await download(alice, extended.id);
    expect(got.headers['content-disposition']).toBe(
      `attachment; filename="resume ___ __.pdf"; filename*=UTF-8''r%C3%A9sum%C3%A9%20%E6%97%A5%E6%9C%AC%E8%AA%9E%20%F0%9F%98%80.pdf`,
    );
  });

  it('escapes quotes in Content-Disposition', async () => {
    const attachment = await uploadNamed(`filename="it's%22(1)%22.txt"`);
    expect(attachment.filename).toBe(`it's"(1)".txt`);
    const got = await download(alice, attachment.id);
    expect(got.headers['content-disposition']).toBe(
      `attachment; filename="it's_(1)_.txt"; filename*=UTF-8''it%27s%22%281%29%22.txt`,
    );
  });

  it('truncates very long names to 255 bytes of UTF-8, keeping the extension and whole characters', async () => {
    const ascii = await uploadNamed(`filename="${'a'.repeat(1000)}.txt"`);
    expect(ascii.filename).toBe(`${'a'.repeat(251)}.txt`);

    const accented = await uploadNamed(`filename="${'é'.repeat(300)}"`);
    expect(Buffer.byteLength(accented.filename)).toBe(254);
    expect(accented.filename).toBe('é'.repeat(127));

    const emoji = await uploadNamed(`filename="${'😀'.repeat(100)}.png"`);
    expect(Buffer.byteLength(emoji.filename)).toBeLessThanOrEqual(255);
    expect(emoji.filename).toBe(`${'😀'.repeat(62)}.png`);
  });
});

describe('rejected uploads leave nothing behind', () => {
  async function expectNothingStored(taskId: string) {
    expect(await listFor(alice, taskId)).toEqual([]);
    expect((await getTask(service, alice, taskId)).attachmentCount).toBe(0);
    await eventually(noPartialWrites, 'partial writes removed');
    const keys = new Set(
      (await service.ctx.db.sql.all(tables.selectFrom('attachments').select('storage_key'))).map((a) => a.storage_key),
    );
    expect((await storedObjects()).filter((key) => !keys.has(key))).toEqual([]);
  }

  it('answers 413 to a file one byte over the limit, read as it streams', async () => {
    const task = await createTask(service, alice);
    const res = await post(alice, task.id).attach('file', Buffer.alloc(MAX_BYTES + 1, 7), {
      filename: 'big.bin',
      contentType: 'application/octet-stream',
    });
    const problem = expectProblem(res, 413, 'payload_too_large');
    expect(problem.detail).toContain(String(MAX_BYTES));
    await expectNothingStored(task.id);
  });

  it('accepts a file of exactly the limit', async () => {
    const task = await createTask(service, alice);
    const bytes = Buffer.alloc(MAX_BYTES, 1);
    expect((await upload(alice, task.id, bytes, 'exact.bin')).size).toBe(MAX_BYTES);
  });

  it('answers 413 at once, before the body, when Content-Length is over the limit', async () => {
    const task = await createTask(service, alice);
    const { body, contentType } = multipart([
      { name: 'file', params: 'filename="huge.bin"', data: Buffer.alloc(1024) },
    ]);
    const upload = rawUpload(task.id, contentType, MAX_BYTES * 4);
    // Only a start of the announced body is ever sent: the answer must not wait for the rest.
    upload.req.write(body.subarray(0, 512));
    const answer = await upload.answer;
    upload.req.destroy();
    expect(answer.status).toBe(413);
    expect(ProblemSchema.parse(JSON.parse(answer.body)).code).toBe('payload_too_large');
    await expectNothingStored(task.id);
  });

  it('answers a client that sends the whole oversized body before reading (fetch, a raw socket) with the 413 problem, not a reset connection', async () => {
    const task = await createTask(service, alice);
    // Just over the limit (refused as it streams) and far over it (refused from Content-Length).
    for (const size of [MAX_BYTES + 1, MAX_BYTES * 12]) {
      const form = new FormData();
      form.append('file', new Blob([Buffer.alloc(size, 3)]), 'big.bin');
      const res = await fetch(`http://127.0.0.1:${port}/tasks/${task.id}/attachments`, {
        method: 'POST',
        headers: { Authorization: alice.auth },
        body: form,
      });
      expect(res.status).toBe(413);
      expect(ProblemSchema.parse(await res.json()).code).toBe('payload_too_large');
    }
    // A client that writes every byte, at the socket's pace, before it reads the answer.
    const { body, contentType } = multipart([
      { name: 'file', params: 'filename="huge.bin"', data: Buffer.alloc(MAX_BYTES * 12, 4) },
    ]);
    const socket = net.connect(port, '127.0.0.1');
    await once(socket, 'connect');
    const received: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    const failed = new Promise<never>((_resolve, reject) => socket.on('error', reject));
    const head = `POST /tasks/${task.id}/attachments HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${alice.auth}\r\nContent-Type: ${contentType}\r\nContent-Length: ${body.length}\r\n\r\n`;
    const sendAll = async () => {
      socket.write(head);
      for (let offset = 0; offset < body.length; offset += 64 * 1024) {
        if (!socket.write(body.subarray(offset, offset + 64 * 1024))) await once(socket, 'drain');
      }
    };
    await Promise.race([sendAll(), failed]);
    await Promise.race([eventuallyTrue(() => Buffer.concat(received).includes('payload_too_large')), failed]);
    socket.destroy();
    expect(Buffer.concat(received).toString()).toMatch(/^HTTP\/1\.1 413 /);
    await expectNothingStored(task.id);
  });

  it('removes a half-received file when the client aborts mid-upload', async () => {
    const task = await createTask(service, alice);
    const { body, contentType } = multipart([
      { name: 'file', params: 'filename="half.bin"', data: randomBytes(1024 * 1024) },
    ]);
    const writesBefore = writesBegun;
    const upload = rawUpload(task.id, contentType, body.length);
    upload.answer.catch(() => undefined);
    upload.req.write(body.subarray(0, body.length / 2));
    // The upload is under way once it reached the storage; then the client goes away.
    await eventually(() => uploadStarted(writesBefore), 'the upload started');
    upload.req.destroy();
    await expectNothingStored(task.id);
    await service.http.get('/healthz').expect(200);
  });

  it('removes the stored bytes when the row cannot be written (the task went away mid-upload)', async () => {
    const task = await createTask(service, alice);
    const { body, contentType } = multipart([
      { name: 'file', params: 'filename="late.bin"', data: randomBytes(512 * 1024) },
    ]);
    const writesBefore = writesBegun;
    const upload = rawUpload(task.id, contentType, body.length);
    upload.req.write(body.subarray(0, body.length / 2));
    await eventually(() => uploadStarted(writesBefore), 'the upload started');
    await service.http.delete(`/tasks/${task.id}`).set('Authorization', alice.auth).expect(204);
    upload.req.end(body.subarray(body.length / 2));
    const answer = await upload.answer;
    expect(answer.status).toBe(404);
    expect(await countAttachments(service.ctx.db.sql, task.id)).toBe(0);
    await eventually(noPartialWrites, 'partial writes removed');
    const keys = new Set(
      (await service.ctx.db.sql.all(tables.selectFrom('attachments').select('storage_key'))).map((a) => a.storage_key),
    );
    expect((await storedObjects()).filter((key) => !keys.has(key))).toEqual([]);
  });

  it.skipIf(backend !== 'fs')(
    'answers 507 storage_full when the disk is full, logged at error, and keeps nothing',
    async () => {
      const task = await createTask(service, alice);
      const errors = vi.spyOn(service.ctx.logger, 'error');
      fullDisk.on = true;
      try {
        const res = await post(alice, task.id).attach('file', randomBytes(256 * 1024), {
          filename: 'no-room.bin',
          contentType: 'application/octet-stream',
        });
        expectProblem(res, 507, 'storage_full');
        expect(JSON.stringify(res.body)).not.toMatch(/ENOSPC|attachments\//);
      } finally {
        fullDisk.on = false;
      }
      expect(errors.mock.calls.some((call) => /full/.test(call.map(String).join(' ')))).toBe(true);
      errors.mockRestore();
      await expectNothingStored(task.id);
    },
  );

  it('answers 400 when there is no part named "file", or more than one part', async () => {
    const task = await createTask(service, alice);
    const cases: Part[][] = [
      [{ name: 'document', params: 'filename="a.txt"', data: 'a' }],
      [{ name: 'file', data: 'a text field, not a file' }],
      [
        { name: 'file', params: 'filename="a.txt"', data: 'a' },
        { name: 'file', params: 'filename="b.txt"', data: 'b' },
      ],
      [
        { name: 'file', params: 'filename="a.txt"', data: 'a' },
        { name: 'note', data: 'extra' },
      ],
      [],
    ];
    for (const parts of cases) {
      const problem = expectProblem(await sendMultipart(alice, task.id, parts), 400, 'validation_failed');
      expect(problem.errors?.map((e) => e.path)).toEqual(['body.file']);
    }
    expectProblem(await post(alice, task.id), 400, 'validation_failed');
    await expectNothingStored(task.id);
  });

  it('answers 400 to a malformed multipart body and 415 to another media type', async () => {
    const task = await createTask(service, alice);
    const truncated = multipart([{ name: 'file', params: 'filename="a.txt"', data: 'abc' }]);
    const res = await post(alice, task.id)
      .set('Content-Type', truncated.contentType)
      .send(truncated.body.subarray(0, truncated.body.length - 20));
    expectProblem(res, 400, 'validation_failed');
    expectProblem(
      await post(alice, task.id).set('Content-Type', 'multipart/form-data').send('no boundary'),
      400,
      'validation_failed',
    );
    expectProblem(await post(alice, task.id).send({ file: 'json' }), 415, 'unsupported_media_type');
    await expectNothingStored(task.id);
  });

  it(`answers 409 beyond ${MAX_PER_TASK} attachments on a task`, async () => {
    const task = await createTask(service, alice);
    for (let i = 0; i < MAX_PER_TASK; i++) await upload(alice, task.id, Buffer.from(`file ${i}`));
    const before = (await storedObjects()).length;
    const res = await post(alice, task.id).attach('file', Buffer.from('one too many'), { filename: 'extra.txt' });
    expectProblem(res, 409, 'conflict');
    expect(await listFor(alice, task.id)).toHaveLength(MAX_PER_TASK);
    expect((await storedObjects()).length).toBe(before);
  });

  it('answers 400 to a malformed task id and 404 to an unknown task', async () => {
    const bytes = Buffer.from('x');
    expectProblem(await post(alice, 'not-a-uuid').attach('file', bytes, { filename: 'x' }), 400, 'validation_failed');
    expectProblem(await post(alice, randomUUID()).attach('file', bytes, { filename: 'x' }), 404, 'not_found');
  });
});

describe('who may do what', () => {
  let task: Task;
  let byAlice: Attachment;
  beforeAll(async () => {
    task = await createTask(service, alice, { assigneeId: bob.user.id });
    byAlice = await upload(alice, task.id, Buffer.from('from alice'), 'alice.txt');
  });

  it('lets the assignee list, upload and download', async () => {
    const byBob = await upload(bob, task.id, Buffer.from('from bob'), 'bob.txt');
    expect(byBob.uploadedBy).toBe(bob.user.id);
    expect((await listFor(bob, task.id)).map((a) => a.id)).toEqual(expect.arrayContaining([byAlice.id, byBob.id]));
    expect((await download(bob, byAlice.id)).bytes.toString()).toBe('from alice');
  });

  it('answers 404 to a user who cannot see the task, for every operation', async () => {
    const paths = [`/tasks/${task.id}/attachments`, `/attachments/${byAlice.id}`, `/attachments/${byAlice.id}/content`];
    for (const p of paths) expectProblem(await service.http.get(p).set('Authorization', carol.auth), 404, 'not_found');
    expectProblem(await post(carol, task.id).attach('file', Buffer.from('x'), { filename: 'x' }), 404, 'not_found');
    expectProblem(
      await service.http.delete(`/attachments/${byAlice.id}`).set('Authorization', carol.auth),
      404,
      'not_found',
    );
    expect(await listFor(alice, task.id)).toEqual(expect.arrayContaining([byAlice]));
  });

  it('answers 400 to malformed ids and 404 to unknown ones', async () => {
    expectProblem(
      await service.http.get('/attachments/nope').set('Authorization', alice.auth),
      400,
      'validation_failed',
    );
    expectProblem(
      await service.http.get(`/attachments/${randomUUID()}/content`).set('Authorization', alice.auth),
      404,
      'not_found',
    );
    expectProblem(
      await service.http.delete(`/attachments/${randomUUID()}`).set('Authorization', alice.auth),
      404,
      'not_found',
    );
  });

  it("lets the uploader, the task's owner and an admin delete; another viewer gets 403", async () => {
    const forBob = await upload(alice, task.id, Buffer.from('owner upload'));
    expectProblem(
      await service.http.delete(`/attachments/${forBob.id}`).set('Authorization', bob.auth),
      403,
      'forbidden',
    );

    const own = await upload(bob, task.id, Buffer.from('bob deletes this'));
    const ownersPick = await upload(bob, task.id, Buffer.from('alice deletes this'));
    const adminsPick = await upload(bob, task.id, Buffer.from('the admin deletes this'));
    await service.http.delete(`/attachments/${own.id}`).set('Authorization', bob.auth).expect(204);
    await service.http.delete(`/attachments/${ownersPick.id}`).set('Authorization', alice.auth).expect(204);
    await service.http.delete(`/attachments/${adminsPick.id}`).set('Authorization', admin.auth).expect(204);

    const left = (await listFor(alice, task.id)).map((a) => a.id);
    expect(left).toContain(forBob.id);
    for (const gone of [own, ownersPick, adminsPick]) {
      expect(left).not.toContain(gone.id);
      expectProblem(
        await service.http.get(`/attachments/${gone.id}/content`).set('Authorization', alice.auth),
        404,
        'not_found',
      );
    }
    const keys = (
      await service.ctx.db.sql.all(
        tables.selectFrom('attachments').select('storage_key').where('task_id', '=', task.id),
      )
    ).map((a) => a.storage_key);
    expect((await storedObjects()).filter((key) => keys.includes(key)).sort()).toEqual([...keys].sort());
  });
});

describe('deleting what attachments belong to', () => {
  async function storageKeysOf(ids: string[]): Promise<string[]> {
    const rows = await service.ctx.db.sql.all(
      tables.selectFrom('attachments').select('storage_key').where('id', 'in', ids),
    );
    expect(rows).toHaveLength(ids.length);
    return rows.map((row) => row.storage_key);
  }

  it('removes the bytes with their task', async () => {
    const task = await createTask(service, alice);
    const ids = [
      (await upload(alice, task.id, Buffer.from('a'))).id,
      (await upload(alice, task.id, Buffer.from('b'))).id,
    ];
    const keys = await storageKeysOf(ids);
    expect(await storedObjects()).toEqual(expect.arrayContaining(keys));
    await service.http.delete(`/tasks/${task.id}`).set('Authorization', alice.auth).expect(204);
    const left = await storedObjects();
    for (const key of keys) expect(left).not.toContain(key);
  });

  it('removes the bytes of a deleted user: their tasks’ and their uploads to other tasks', async () => {
    const dave = await registerUser(service, { name: 'Dave' });
    const own = await createTask(service, dave);
    const shared = await createTask(service, alice, { assigneeId: dave.user.id });
    const ownFile = await upload(dave, own.id, Buffer.from('dave own'));
    const sharedFile = await upload(dave, shared.id, Buffer.from('dave on alice'));
    const alicesFile = await upload(alice, shared.id, Buffer.from('alice keeps'));
    const [gone1, gone2] = await storageKeysOf([ownFile.id, sharedFile.id]);
    const [kept] = await storageKeysOf([alicesFile.id]);

    await service.http.delete(`/users/${dave.user.id}`).set('Authorization', dave.auth).expect(204);
    const left = await storedObjects();
    expect(left).not.toContain(gone1);
    expect(left).not.toContain(gone2);
    expect(left).toContain(kept);
    expect((await listFor(alice, shared.id)).map((a) => a.id)).toEqual([alicesFile.id]);
  });
});

describe('orphan sweep', () => {
  it('removes objects no row names once older than the grace period, and keeps referenced ones', async () => {
    const task = await createTask(service, alice);
    const kept = await upload(alice, task.id, Buffer.from('referenced'));
    const orphan = await service.ctx.attachmentStorage.write(Readable.from([Buffer.from('no row names me')]), {
      maxBytes: MAX_BYTES,
    });
    const now = new Date();
    expect((await sweepOrphans(service.ctx, now)).orphans).toBe(0);
    expect(await storedObjects()).toContain(orphan.key);

    const later = new Date(now.getTime() + ORPHAN_GRACE_MS + 60_000);
    expect((await sweepOrphans(service.ctx, later)).orphans).toBeGreaterThanOrEqual(1);
    expect(await storedObjects()).not.toContain(orphan.key);
    expect((await download(alice, kept.id)).bytes.toString()).toBe('referenced');
  });

  it.runIf(backend === 'fs')(
    'removes old partial writes and old unreferenced objects, and keeps recent ones and referenced ones',
    async () => {
      const task = await createTask(service, alice);
      const kept = await upload(alice, task.id, Buffer.from('referenced'));
      const [keptKey] = (
        await service.ctx.db.sql.all(tables.selectFrom('attachments').select('storage_key').where('id', '=', kept.id))
      ).map((a) => a.storage_key);
      const now = new Date();
      const old = new Date(now.getTime() - ORPHAN_GRACE_MS - 60_000);
      await mkdir(storageDir('objects'), { recursive: true });
      const file = async (dir: 'objects' | 'tmp', name: string, mtime: Date) => {
        await writeFile(path.join(storageDir(dir), name), 'stray');
        await utimes(path.join(storageDir(dir), name), mtime, mtime);
        return name;
      };
      const oldOrphan = await file('objects', randomUUID(), old);
      const newOrphan = await file('objects', randomUUID(), now);
      const oldPartial = await file('tmp', `${randomUUID()}.partial`, old);
      const newPartial = await file('tmp', `${randomUUID()}.partial`, now);
      await utimes(path.join(storageDir('objects'), keptKey ?? ''), old, old);

      const result = await sweepOrphans(service.ctx, now);
      expect(result).toEqual({ staleWrites: 1, orphans: 1 });
      const objects = await storedObjects();
      expect(objects).not.toContain(oldOrphan);
      expect(objects).toEqual(expect.arrayContaining([newOrphan, keptKey]));
      expect(await partialWrites()).toEqual([newPartial]);
      expect(await partialWrites()).not.toContain(oldPartial);
      expect((await download(alice, kept.id)).bytes.toString()).toBe('referenced');
      await rm(path.join(storageDir('objects'), newOrphan));
      await rm(path.join(storageDir('tmp'), newPartial));
    },
  );
});
