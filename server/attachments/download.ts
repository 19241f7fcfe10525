import type { ByteRange } from '../storage/storage.js';

export type RangeDecision = { kind: 'full' } | { kind: 'partial'; range: ByteRange } | { kind: 'unsatisfiable' };

const RANGE_SPEC = /^(\d*)-(\d*)$/;

/**
 * RFC 9110 §14: one `bytes=` range is served as 206 and one beyond the end is 416. Several ranges,
 * another unit, a malformed header or a stale If-Range are answered with the whole content, as a
 * server may ignore Range.
 */
export function rangeOf(headers: { range?: string; 'if-range'?: string }, size: number, etag: string): RangeDecision {
  const full: RangeDecision = { kind: 'full' };
  const header = headers.range?.trim();
  if (header === undefined || !/^bytes=/i.test(header)) return full;
  if (headers['if-range'] !== undefined && headers['if-range'].trim() !== etag) return full;
  const specs = header
    .slice('bytes='.length)
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  const match = specs.length === 1 ? RANGE_SPEC.exec(specs[0] ?? '') : null;
  if (!match) return full;
  const [, first = '', last = ''] = match;
  if (first === '' && last === '') return full;
  if (first === '') {
    const suffix = Number(last);
    if (suffix === 0 || size === 0) return { kind: 'unsatisfiable' };
    return { kind: 'partial', range: { start: Math.max(0, size - suffix), end: size - 1 } };
  }
  const start = Number(first);
  if (last !== '' && Number(last) < start) return full;
  if (start >= size) return { kind: 'unsatisfiable' };
  return { kind: 'partial', range: { start, end: last === '' ? size - 1 : Math.min(Number(last), size - 1) } };
}
