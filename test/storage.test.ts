import { sha256 } from './support/binary.js';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../server/config.js';
import { OperatorError } from '../server/operator-error.js';
import { fileSystemStorage } from '../server/storage/fs-storage.js';
import { ObjectStoreUnavailableError, s3Storage } from '../server/storage/s3-storage.js';
import { ObjectTooLargeError, type AttachmentStorage } from '../server/storage/storage.js';
import { HEAD_BYTES } from '../server/storage/tally.js';
import { startObjectStore, type TestObjectStore } from './support/object-store.js';

const MIB = 1024 * 1024;

async function bytesOf(stream: Readable | undefined): Promise<Buffer> {
  if (!stream) throw new Error('no such object');
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)));
  return Buffer.concat(chunks);
}

/** A source that yields `bytes` in pieces, the way an upload arrives. */
function sourceOf(bytes: Buffer, piece = 64 * 1024): Readable {
  return Readable.from(
    (function* () {
      for (let offset = 0; offset < bytes.length; offset += piece) yield bytes.subarray(offset, offset + piece);
    })(),
  );
}

/** A source that sends `bytes` and then fails, as a client that goes away. */
function failingSource(bytes: Buffer): Readable {
  return Readable.from(
    (async function* () {
      yield bytes;
      await new Promise((resolve) => setTimeout(resolve, 10));
      throw new Error('client went away');
    })(),
  );
}

async function keysOf(storage: AttachmentStorage): Promise<string[]> {
  const keys: string[] = [];
  for await (const entry of storage.list()) keys.push(entry.key);
  return keys;
}

let objectStore: TestObjectStore;
let fsRoot: string;
beforeAll(async () => {
  objectStore = await startObjectStore();
  fsRoot = await mkdtemp(path.join(tmpdir(), 'fs-storage-'));
});
afterAll(async () => {
  await objectStore.close();
  await rm(fsRoot, { recursive: true, force: true });
});

// One suite, both backends: what the service relies on must hold for each.
describe.each([
  { backend: 'fs', open: () => fileSystemStorage(fsRoot) },
  { backend: 's3', open: () => s3Storage(objectStore.config) },
])('attachment storage ($backend)', ({ open }) => {
  let storage: AttachmentStorage;
  beforeAll(async () => {
    storage = await open();
  });
  afterAll(() => storage.close());

  it('stores what it is given, counting size and sha256 and keeping the first bytes', async () => {
    const bytes = randomBytes(100_000);
    const stored = await storage.write(sourceOf(bytes), { maxBytes: MIB });
    expect(stored).toMatchObject({ size: bytes.length, sha256: sha256(bytes) });
    expect(stored.head.equals(bytes.subarray(0, HEAD_BYTES))).toBe(true);
    expect((await bytesOf(await storage.open(stored.key))).equals(bytes)).toBe(true);
  });

  it('stores an empty file', async () => {
    const stored = await storage.write(sourceOf(Buffer.alloc(0)), { maxBytes: MIB });
    expect(stored).toMatchObject({ size: 0, sha256: sha256(Buffer.alloc(0)) });
    expect(await bytesOf(await storage.open(stored.key))).toHaveLength(0);
  });

  it('streams a file of several parts unchanged (multipart on S3)', async () => {
    const bytes = randomBytes(12 * MIB + 12_345);
    const stored = await storage.write(sourceOf(bytes), { maxBytes: 13 * MIB });
    expect(stored).toMatchObject({ size: bytes.length, sha256: sha256(bytes) });
    const back = await bytesOf(await storage.open(stored.key));
    expect(back.length).toBe(bytes.length);
    expect(sha256(back)).toBe(sha256(bytes));
  });

  it('serves a byte range from the store', async () => {
    const bytes = randomBytes(50_000);
    const { key } = await storage.write(sourceOf(bytes), { maxBytes: MIB });
    expect((await bytesOf(await storage.open(key, { start: 100, end: 199 }))).equals(bytes.subarray(100, 200))).toBe(
      true,
    );
    expect(
      (await bytesOf(await storage.open(key, { start: 49_990, end: 49_999 }))).equals(bytes.subarray(49_990)),
    ).toBe(true);
    // One byte, not the first: s3rver answers `bytes=0-0` with the whole object (real S3 does not).
    expect((await bytesOf(await storage.open(key, { start: 1, end: 1 }))).equals(bytes.subarray(1, 2))).toBe(true);
  });

  it('refuses more than maxBytes with a domain error and keeps nothing', async () => {
    const before = await keysOf(storage);
    const write = storage.write(sourceOf(randomBytes(6 * MIB)), { maxBytes: 5 * MIB + 1 });
    await expect(write).rejects.toBeInstanceOf(ObjectTooLargeError);
    await expect(write).rejects.toMatchObject({ maxBytes: 5 * MIB + 1 });
    expect((await keysOf(storage)).sort()).toEqual(before.sort());
  });

  it('keeps nothing when the source fails midway', async () => {
    const before = await keysOf(storage);
    await expect(storage.write(failingSource(randomBytes(64 * 1024)), { maxBytes: MIB })).rejects.toThrow(
      'client went away',
    );
    expect((await keysOf(storage)).sort()).toEqual(before.sort());
  });

  it('answers undefined for a missing object, and removes idempotently', async () => {
    expect(await storage.open(randomUUID())).toBeUndefined();
    const { key } = await storage.write(sourceOf(Buffer.from('short')), { maxBytes: MIB });
    expect(await text((await storage.open(key)) ?? Readable.from([]))).toBe('short');
    await storage.remove(key);
    expect(await storage.open(key)).toBeUndefined();
    await storage.remove(key);
    expect(await keysOf(storage)).not.toContain(key);
  });

  it('lists what it holds with a modification time', async () => {
    const started = Date.now();
    const { key } = await storage.write(sourceOf(Buffer.from('listed')), { maxBytes: MIB });
    const entries: { key: string; modifiedAt: Date }[] = [];
    for await (const entry of storage.list()) entries.push(entry);
    const entry = entries.find((e) => e.key === key);
    expect(entry).toBeDefined();
    // Object stores keep seconds.
    expect(entry!.modifiedAt.getTime()).toBeGreaterThanOrEqual(Math.floor(started / 1000) * 1000);
    expect(entry!.modifiedAt.getTime()).toBeLessThanOrEqual(Date.now() + 1000);
  });

  it('builds no location from anything but a storage key', async () => {
    await expect(storage.open('../../etc/passwd')).rejects.toThrow('Not a storage key');
    await expect(storage.remove('attachments/x')).rejects.toThrow('Not a storage key');
  });

  it('finds no partial write younger than the cut-off', async () => {
    expect(await storage.removeStaleWrites(new Date(Date.now() - 60_000))).toBe(0);
  });
});

describe('a misconfigured object store', () => {
  it('stops the start with one line naming the bucket', async () => {
    const error = await s3Storage({ ...objectStore.config, bucket: 'no-such-bucket' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ObjectStoreUnavailableError);
    expect(error).toBeInstanceOf(OperatorError);
    expect(String((error as Error).message)).toMatch(
      /^Attachment storage: bucket "no-such-bucket" at http:\/\/127\.0\.0\.1:\d+ is not usable: no such bucket$/,
    );
  });

  it('stops the start when the credentials are wrong', async () => {
    // s3rver checks the access key id, not a V4 signature.
    const error = await s3Storage({
      ...objectStore.config,
      credentials: { accessKeyId: 'NOBODY', secretAccessKey: 'wrong' },
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ObjectStoreUnavailableError);
    expect((error as Error).message).toMatch(
      /is not usable: access denied \(check S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY\)$/,
    );
  });

  it('stops the start when nothing listens at the endpoint', async () => {
    const error = await s3Storage({ ...objectStore.config, endpoint: 'http://127.0.0.1:9' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ObjectStoreUnavailableError);
    expect((error as Error).message).toMatch(
      /^Attachment storage: bucket "task-service-test" at http:\/\/127\.0\.0\.1:9 is not usable: .+$/,
    );
  });

  it('is refused by the configuration without a bucket or with half the credentials', () => {
    expect(() => loadConfig({ ATTACHMENT_STORAGE: 's3' })).toThrow(
      /^Invalid configuration: S3_BUCKET is required when ATTACHMENT_STORAGE=s3$/,
    );
    expect(() => loadConfig({ ATTACHMENT_STORAGE: 's3', S3_BUCKET: 'b', S3_ACCESS_KEY_ID: 'x' })).toThrow(
      /S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY must be set together/,
    );
    expect(() => loadConfig({ ATTACHMENT_STORAGE: 'ftp' })).toThrow(/ATTACHMENT_STORAGE/);
    expect(loadConfig({ ATTACHMENT_STORAGE: 's3', S3_BUCKET: 'b' }).attachments.storage).toEqual({
      kind: 's3',
      bucket: 'b',
      region: 'us-east-1',
      endpoint: undefined,
      forcePathStyle: false,
      credentials: undefined,
    });
  });
});
