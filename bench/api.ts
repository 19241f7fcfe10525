// The few calls the harness makes to the service itself (set-up only, never under load).
import { z } from 'zod';
import { AttachmentSchema, type Attachment } from '../contract/attachments.js';
import { AuthResultSchema, type AuthResult } from '../contract/auth.js';
import { CommentSchema, type Comment } from '../contract/comments.js';
import { pageOf } from '../contract/common.js';

export const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

async function call<T extends z.ZodTypeAny>(url: string, init: RequestInit, schema: T): Promise<z.infer<T>> {
  const res = await fetch(url, init);
  const text = await res.text();
  if (!res.ok) throw new Error(`${init.method ?? 'GET'} ${url}: ${res.status} ${text.slice(0, 200)}`);
  return schema.parse(JSON.parse(text));
}

const postJson = (body: unknown, headers: Record<string, string> = {}): RequestInit => ({
  method: 'POST',
  headers: { 'content-type': 'application/json', ...headers },
  body: JSON.stringify(body),
});

export const register = (base: string, email: string, password: string, name: string): Promise<AuthResult> =>
  call(`${base}/auth/register`, postJson({ email, password, name }), AuthResultSchema);

export const login = (base: string, email: string, password: string): Promise<AuthResult> =>
  call(`${base}/auth/login`, postJson({ email, password }), AuthResultSchema);

export const comment = (base: string, token: string, taskId: string, body: string): Promise<Comment> =>
  call(`${base}/tasks/${taskId}/comments`, postJson({ body }, bearer(token)), CommentSchema);

const JwksSchema = z.object({
  keys: z.array(z.object({ kty: z.string(), crv: z.string(), x: z.string(), kid: z.string() })).min(1),
});
export type PublicJwk = z.infer<typeof JwksSchema>['keys'][number];

export async function publicKey(base: string): Promise<PublicJwk> {
  const { keys } = await call(`${base}/.well-known/jwks.json`, {}, JwksSchema);
  const [key] = keys;
  if (!key) throw new Error('the service publishes no key');
  return key;
}

const IdPageSchema = pageOf(z.object({ id: z.string() }));

/**
 * The cursor that starts page `page` of the list `list` (a path, with its query if any: `/tasks?sort=title`,
 * `/tasks/{id}/comments`) at `limit` items a page, or of the last page when the list is shorter;
 * found by following nextCursor (100 items a hop: a cursor names an item, whatever the page size).
 */
export async function deepCursor(
  base: string,
  token: string,
  list: string,
  page: number,
  limit: number,
): Promise<{ cursor: string | undefined; page: number }> {
  const follow = async (skip: number) => {
    let cursor: string | undefined;
    let seen = 0;
    while (seen < skip) {
      const step = Math.min(100, skip - seen);
      const at = `${base}${list}${list.includes('?') ? '&' : '?'}limit=${step}${cursor ? `&cursor=${cursor}` : ''}`;
      const { items, nextCursor } = await call(at, { headers: bearer(token) }, IdPageSchema);
      seen += items.length;
      if (nextCursor === null) return { cursor, seen, ended: true };
      cursor = nextCursor;
    }
    return { cursor, seen, ended: false };
  };
  const wanted = await follow((page - 1) * limit);
  if (!wanted.ended) return { cursor: wanted.cursor, page };
  const last = Math.max(1, Math.ceil(wanted.seen / limit));
  return { cursor: (await follow((last - 1) * limit)).cursor, page: last };
}

export async function upload(base: string, token: string, taskId: string, bytes: number): Promise<Attachment> {
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(bytes)]), 'bench.bin');
  return call(
    `${base}/tasks/${taskId}/attachments`,
    { method: 'POST', headers: bearer(token), body: form },
    AttachmentSchema,
  );
}
