import { z } from 'zod';
import type { ChangesPage, ChangesQuery } from '@task-service/client';
import type { AppContext } from '../context.js';
import type { CursorCodec } from '../http/pagination.js';
import { AppError, invalidField } from '../http/errors.js';
import type { Principal } from '../http/principal.js';
import { eventSeenBy, purgedPast, readerOf, readLog, START, type Position } from './log.js';

// Opaque to clients: a log position, `<txid>.<seq>`, signed by the service like list cursors.
const CHANGES_CURSOR = 'changes';
const MAX_BIGINT = 2n ** 63n - 1n;
const PositionSchema = z
  .string()
  .regex(/^\d{1,19}\.\d{1,19}$/)
  .transform((text) => text.split('.').map(BigInt))
  .refine((parts) => parts.every((part) => part <= MAX_BIGINT));

const invalidChangesCursor = () =>
  invalidField(
    'query.cursor',
    'invalid_cursor',
    'Not a cursor this feed issued: use nextCursor from a previous answer',
  );

export const encodePosition = (cursors: CursorCodec, position: Position): string =>
  cursors.seal(CHANGES_CURSOR, `${position.txid}.${position.seq}`);

/** The position a cursor of this feed names; a forged, altered or out-of-range one is 400. */
export function decodePosition(cursors: CursorCodec, cursor: string): Position {
  const parsed = PositionSchema.safeParse(cursors.unseal(CHANGES_CURSOR, cursor));
  const [txid, seq] = parsed.success ? parsed.data : [];
  if (txid === undefined || seq === undefined) throw invalidChangesCursor();
  return { txid, seq };
}

export const cursorExpired = () =>
  new AppError(
    'cursor_expired',
    'Events after this position are past the retention and were deleted: do a full sync, then follow the feed from its new cursor',
  );

/** GET /changes: the caller's events after the cursor, in commit order. */
export async function readChanges(ctx: AppContext, principal: Principal, query: ChangesQuery): Promise<ChangesPage> {
  const after = query.cursor === undefined ? START : decodePosition(ctx.cursors, query.cursor);
  if (query.cursor !== undefined && (await purgedPast(ctx, after))) throw cursorExpired();
  const reader = readerOf(principal);
  const page = await readLog(ctx, after, query.limit, reader);
  return {
    items: page.events.map((logged) => eventSeenBy(reader, logged)),
    nextCursor: encodePosition(ctx.cursors, page.next),
  };
}
