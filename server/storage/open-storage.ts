import path from 'node:path';
import type { Config } from '../config.js';
import { fileSystemStorage } from './fs-storage.js';
import { s3Storage } from './s3-storage.js';
import type { AttachmentStorage } from './storage.js';

/** The attachment storage the configuration names: a directory under DATA_DIR, or an S3 bucket. */
export function openAttachmentStorage(config: Pick<Config, 'attachments' | 'dataDir'>): Promise<AttachmentStorage> {
  const storage = config.attachments.storage;
  return storage.kind === 's3' ? s3Storage(storage) : fileSystemStorage(path.join(config.dataDir, 'attachments'));
}
