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
 * If-Match (RFC 9110 §13.1.1) on a versioned resource, for a check made in SQL: the versions it
 * names with strong comparison (a weak tag never matches), or null when it is absent or `*` (the
 * resource need only exist). A list naming no version matches none.
 */
export function ifMatchVersions(header: string | undefined): number[] | null {
  if (header === undefined || header.trim() === '*') return null;
  return listed(header).flatMap((tag) => {
    const match = /^"(\d{1,9})"$/.exec(tag);
    return match?.[1] ? [Number(match[1])] : [];
  });
}
