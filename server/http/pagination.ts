import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Request, Response } from 'express';
import { z } from 'zod';
import { invalidField } from './errors.js';

/**
 * Keyset pagination: a cursor names the last item of a page by its sort value and id, so every
 * page costs what the first does and concurrent inserts never shift a page.
 */
const CursorSchema = z.object({
  s: z.string(),
  v: z.union([z.string(), z.number(), z.null()]),
  id: z.string().uuid(),
});
export type Cursor = z.infer<typeof CursorSchema>;

export const invalidCursor = () =>
  invalidField(
    'query.cursor',
    'invalid_cursor',
    'Not a cursor this list issued: use nextCursor from the previous page of the same list',
  );

const MAC_BYTES = 16;
const LIST_CURSOR = 'list';

/**
 * Cursors are signed (`<payload>.<HMAC>`), so the service only ever reads back values it wrote:
 * a forged or altered cursor is 400 before its contents are looked at. Every instance configured
 * with the same secret accepts the others' cursors. List cursors and the changes feed's positions
 * are signed alike, each kind under its own name, so one is never taken for the other.
 */
export function cursorCodec(secret: Uint8Array) {
  const mac = (kind: string, payload: string) =>
    createHmac('sha256', secret).update(`${kind}\n${payload}`).digest().subarray(0, MAC_BYTES);

  /** `text` signed as a cursor of `kind`. */
  const seal = (kind: string, text: string): string => {
    const payload = Buffer.from(text).toString('base64url');
    return `${payload}.${mac(kind, payload).toString('base64url')}`;
  };

  /** The text a cursor of `kind` carries when this service signed it, else undefined. */
  const unseal = (kind: string, raw: string): string | undefined => {
    const [payload = '', signature = '', ...rest] = raw.split('.');
    // Compared as text, so that no other spelling of the same bytes passes either.
    const given = Buffer.from(signature);
    const expected = Buffer.from(mac(kind, payload).toString('base64url'));
    if (rest.length > 0 || given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
    return Buffer.from(payload, 'base64url').toString('utf8');
  };

  return {
    seal,
    unseal,

    encode: (cursor: Cursor): string => seal(LIST_CURSOR, JSON.stringify(cursor)),

    /** Decodes a cursor issued for the same sort; anything else is a 400. */
    decode(raw: string | undefined, sort: string): Cursor | undefined {
      if (raw === undefined) return undefined;
      const text = unseal(LIST_CURSOR, raw);
      if (text === undefined) throw invalidCursor();
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        throw invalidCursor();
      }
      const cursor = CursorSchema.safeParse(parsed);
      if (!cursor.success || cursor.data.s !== sort) throw invalidCursor();
      return cursor.data;
    },
  };
}
export type CursorCodec = ReturnType<typeof cursorCodec>;

/** The parts of the HTTP exchange a list needs: the URL it was asked at, and where to put Link. */
export interface ListExchange {
  req: Pick<Request, 'originalUrl'>;
  res: Pick<Response, 'setHeader'>;
}

export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

/**
 * Turns `limit + 1` fetched rows into a page: the extra row only says that a next page exists.
 * Sets the Link header for it.
 */
export function toPage<Row, T>(
  cursors: CursorCodec,
  { req, res }: ListExchange,
  rows: Row[],
  limit: number,
  cursorOf: (row: Row) => Cursor,
  serialize: (row: Row) => T,
): Page<T> {
  const more = rows.length > limit;
  const pageRows = more ? rows.slice(0, limit) : rows;
  const last = pageRows[pageRows.length - 1];
  const nextCursor = more && last ? cursors.encode(cursorOf(last)) : null;
  if (nextCursor) {
    const url = new URL(req.originalUrl, 'http://service.invalid');
    url.searchParams.set('cursor', nextCursor);
    res.setHeader('Link', `<${url.pathname}${url.search}>; rel="next"`);
  }
  return { items: pageRows.map(serialize), nextCursor };
}

/** Lists in creation order (users, tags): ids are UUIDv7, so id order is creation order. */
const CREATION_ORDER = 'id';
export const creationCursor = (row: { id: string }): Cursor => ({ s: CREATION_ORDER, v: null, id: row.id });

/** The id after which the page `cursor` names starts, in creation order (undefined: page 1). */
export const createdAfterId = (cursors: CursorCodec, cursor: string | undefined): string | undefined =>
  cursors.decode(cursor, CREATION_ORDER)?.id;
