// The attachment HTTP tests of test/attachments.test.ts, with the bytes in an S3-compatible store
// (s3rver, started on loopback by that file) instead of DATA_DIR.
process.env.TEST_ATTACHMENT_STORAGE = 's3';
await import('./attachments.test.js');
