/** An entity tag for a value that identifies a representation (a task version, a content digest). */
export const entityTag = (value: string | number): string => `"${value}"`;

const listed = (header: string): string[] => header.split(',').map((tag) => tag.trim());

/**
 * If-None-Match (RFC 9110 §13.1.2): true when it names `etag`, compared weakly, or is `*`.
 * False when the header is absent.
 */
export function noneMatchHits(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  if (header.trim() === '*') return true;
  return listed(header).some((tag) => tag.replace(/^W\//, '') === etag);
}

/**
 * If-Match (RFC 9110 §13.1.1): true when it names `etag` with strong comparison (a weak tag never
 * matches) or is `*`; undefined when the header is absent.
 */
export function ifMatchHolds(header: string | undefined, etag: string): boolean | undefined {
  if (header === undefined) return undefined;
  if (header.trim() === '*') return true;
  return listed(header).includes(etag);
}
