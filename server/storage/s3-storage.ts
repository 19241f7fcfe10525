import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  ListMultipartUploadsCommand,
  paginateListObjectsV2,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import type { S3StorageConfig } from '../config.js';
import { OperatorError } from '../operator-error.js';
import { STORAGE_KEY, type AttachmentStorage, type ByteRange, type StoredEntry, type StoredObject } from './storage.js';
import { Tally } from './tally.js';

/** Every object of the service sits under this prefix, so a sweep never touches anything else. */
const PREFIX = 'attachments/';
/** S3's smallest multipart part; with two in flight an upload holds at most ~10 MiB in memory. */
const PART_BYTES = 5 * 1024 * 1024;
const PARTS_IN_FLIGHT = 2;
const START_CHECK_MS = 10_000;

/** The object store named by the configuration cannot be used; the start stops with this line. */
export class ObjectStoreUnavailableError extends OperatorError {}

const isS3Error = (error: unknown, ...names: string[]): boolean =>
  error instanceof S3ServiceException && names.includes(error.name);

function describe(config: S3StorageConfig): string {
  return `bucket "${config.bucket}" at ${config.endpoint ?? `AWS region ${config.region}`}`;
}

function reasonOf(error: unknown): string {
  if (error instanceof S3ServiceException) {
    const status = error.$metadata.httpStatusCode;
    if (status === 404) return 'no such bucket';
    if (status === 403 || status === 401) return 'access denied (check S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY)';
    return `${error.name}${status ? ` (HTTP ${status})` : ''}`;
  }
  if (error instanceof Error)
    return error.name === 'TimeoutError' ? `no answer within ${START_CHECK_MS / 1000} s` : error.message || error.name;
  return String(error);
}

/**
 * Attachments in an S3-compatible bucket, as `attachments/<key>`. Uploads stream through a
 * multipart upload (a single PUT below 5 MiB), hashed on the way; aborted uploads leave no parts.
 * The bucket is checked once here, so a misconfigured store stops the start.
 */
export async function s3Storage(config: S3StorageConfig): Promise<AttachmentStorage> {
  // The SDK's eight-line notice that its 2027 releases need Node 22 would follow every start (the
  // README says so once); an operator who sets the variable otherwise still sees it.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const client = new S3Client({
    region: config.region,
    endpoint: config.endpoint,
    forcePathStyle: config.forcePathStyle,
    credentials: config.credentials,
    // The service hashes every upload itself. The SDK's newer default checksums (and their
    // chunked upload framing) are not understood by every S3-compatible store.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
  const Bucket = config.bucket;
  const objectKey = (key: string): string => {
    // Keys come from the database; an object name must never be built from anything else.
    if (!STORAGE_KEY.test(key)) throw new Error(`Not a storage key: ${JSON.stringify(key)}`);
    return PREFIX + key;
  };

  try {
    await client.send(new HeadBucketCommand({ Bucket }), { abortSignal: AbortSignal.timeout(START_CHECK_MS) });
  } catch (error) {
    client.destroy();
    throw new ObjectStoreUnavailableError(`Attachment storage: ${describe(config)} is not usable: ${reasonOf(error)}`);
  }

  return {
    async write(source: Readable, { maxBytes }): Promise<StoredObject> {
      const key = randomUUID();
      const tally = new Tally(maxBytes);
      const upload = new Upload({
        client,
        params: { Bucket, Key: objectKey(key), Body: tally.through(source) },
        partSize: PART_BYTES,
        queueSize: PARTS_IN_FLIGHT,
      });
      await upload.done();
      return tally.storedAs(key);
    },

    async open(key: string, range?: ByteRange): Promise<Readable | undefined> {
      try {
        const { Body } = await client.send(
          new GetObjectCommand({
            Bucket,
            Key: objectKey(key),
            Range: range ? `bytes=${range.start}-${range.end}` : undefined,
          }),
        );
        if (!(Body instanceof Readable)) throw new Error('The S3 client answered without a readable body');
        return Body;
      } catch (error) {
        if (isS3Error(error, 'NoSuchKey', 'NotFound')) return undefined;
        throw error;
      }
    },

    async remove(key: string): Promise<void> {
      // Deleting a missing object succeeds in S3.
      await client.send(new DeleteObjectCommand({ Bucket, Key: objectKey(key) }));
    },

    async *list(): AsyncIterable<StoredEntry> {
      for await (const page of paginateListObjectsV2({ client }, { Bucket, Prefix: PREFIX })) {
        for (const object of page.Contents ?? []) {
          const key = object.Key?.slice(PREFIX.length);
          if (key !== undefined && STORAGE_KEY.test(key) && object.LastModified)
            yield { key, modifiedAt: object.LastModified };
        }
      }
    },

    async removeStaleWrites(olderThan: Date): Promise<number> {
      let removed = 0;
      let markers: { KeyMarker?: string; UploadIdMarker?: string } = {};
      for (;;) {
        let page;
        try {
          page = await client.send(new ListMultipartUploadsCommand({ Bucket, Prefix: PREFIX, ...markers }));
        } catch (error) {
          // Some stores cannot list uploads; their lifecycle rule (README) must expire them instead.
          if (isS3Error(error, 'NotImplemented')) return removed;
          throw error;
        }
        for (const upload of page.Uploads ?? []) {
          if (!upload.Key || !upload.UploadId || !upload.Initiated || upload.Initiated >= olderThan) continue;
          await client.send(new AbortMultipartUploadCommand({ Bucket, Key: upload.Key, UploadId: upload.UploadId }));
          removed++;
        }
        if (!page.IsTruncated) return removed;
        markers = { KeyMarker: page.NextKeyMarker, UploadIdMarker: page.NextUploadIdMarker };
      }
    },

    close: () => {
      client.destroy();
      return Promise.resolve();
    },
  };
}
