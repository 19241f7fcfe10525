// The stack baseline's few HTTP pieces: an answer as status, headers and a JSON text, and a request body read whole.
import type { IncomingMessage } from 'node:http';

export interface Answer {
  status: number;
  /** JSON text, sent as it is. */
  body: string;
  headers?: Record<string, string>;
}

export const json = (status: number, body: unknown, headers: Record<string, string> = {}): Answer => ({
  status,
  body: JSON.stringify(body),
  headers,
});

export const problem = (status: number, title: string, headers: Record<string, string> = {}): Answer =>
  json(status, { title, status }, headers);

/** The request's JSON body, or undefined when it is not JSON. */
export async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)));
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    return undefined;
  }
}
