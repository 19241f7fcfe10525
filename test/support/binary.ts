import { createHash } from 'node:crypto';
import type { Response as SuperagentResponse } from 'superagent';

/** A supertest parser that collects a binary body into a Buffer (unknown types are left unparsed). */
export function binary(res: SuperagentResponse, done: (error: Error | null, body: Buffer) => void): void {
  const chunks: Buffer[] = [];
  res.on('data', (chunk: Buffer) => chunks.push(chunk));
  res.on('end', () => done(null, Buffer.concat(chunks)));
}

/** The hex SHA-256 of some bytes, as the service reports an attachment's. */
export const sha256 = (bytes: Buffer | string): string => createHash('sha256').update(bytes).digest('hex');
