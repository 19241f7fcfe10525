import type { Response } from 'supertest';
import { expect } from 'vitest';
import { z } from 'zod';
import { PaginationQuerySchema } from '../../contract/common.js';
import type { TestService } from './app.js';

interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

const BASE = 'http://service.invalid';

/** The path a `Link: <…>; rel="next"` header points at, or undefined when there is none. */
export function nextLink(res: Pick<Response, 'get'>): string | undefined {
  const link = res.get('Link');
  if (link === undefined) return undefined;
  const match = /^<([^>]+)>; rel="next"$/.exec(link);
  expect(match, `unexpected Link header ${link}`).not.toBeNull();
  return match?.[1];
}

/** The query of `path` without its cursor: what every page of one list shares. */
const queryOf = (url: URL) => [...url.searchParams].filter(([name]) => name !== 'cursor').sort();

/**
 * Walks a list from `firstPath` to its last page by the Link headers, checking on every page that
 * Link and nextCursor agree, that Link keeps the path and the query, and that only the last page
 * is short. Returns the items page by page.
 */
export async function walkPages<T>(
  service: TestService,
  auth: string,
  firstPath: string,
  schema: z.ZodType<Page<T>, z.ZodTypeDef, unknown>,
): Promise<T[][]> {
  const pages: T[][] = [];
  for (let path: string | undefined = firstPath; path !== undefined;) {
    const res = await service.http.get(path).set('Authorization', auth).expect(200);
    const page = schema.parse(res.body);
    pages.push(page.items);
    const here = new URL(path, BASE);
    path = nextLink(res);
    if (page.nextCursor === null) {
      expect(path).toBeUndefined();
    } else {
      expect(page.items).toHaveLength(PaginationQuerySchema.parse(Object.fromEntries(here.searchParams)).limit);
      const next = new URL(path ?? '', BASE);
      expect(next.pathname).toBe(here.pathname);
      expect(next.searchParams.get('cursor')).toBe(page.nextCursor);
      expect(queryOf(next)).toEqual(queryOf(here));
    }
    expect(pages.length).toBeLessThan(100);
  }
  return pages;
}
