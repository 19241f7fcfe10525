import path from 'node:path';
import type { Config } from '../config.js';
import { fileSystemStorage } from './fs-storage.js';
import type { AttachmentStorage } from './storage.js';

/** The attachment storage the configuration names: a directory under DATA_DIR, or an S3 bucket. */
export async function openAttachmentStorage(
  config: Pick<Config, 'attachments' | 'dataDir'>,
): Promise<AttachmentStorage> {
  const storage = config.attachments.storage;
  // The AWS SDK is loaded only where S3 is configured.
  if (storage.kind === 's3') return (await import('./s3-storage.js')).s3Storage(storage);
  return fileSystemStorage(path.join(config.dataDir, 'attachments'));
}
