import { EVENT_TYPES, EventSchema, grantsScope, scopeToReadEvent, type Event, type Scope } from '@task-service/client';
import type { AppContext } from '../context.js';
import { sql } from 'kysely';
import { tables } from '../db/query.js';
import { isAdmin, type Principal } from '../http/principal.js';
import { eventMetrics } from './metrics.js';

/**
 * A place in the event log: the writing (sub)transaction's id, then the order within it. Positions
 * below the oldest transaction still running are final: nothing can commit there any more.
 */
export interface Position {
  txid: bigint;
  seq: bigint;
}

export const START: Position = { txid: 0n, seq: 0n };

export const isAfter = (a: Position, b: Position): boolean => a.txid > b.txid || (a.txid === b.txid && a.seq > b.seq);
export const later = (a: Position, b: Position): Position => (isAfter(a, b) ? a : b);

/**
 * Who reads: admins see every event, others those naming them in the audience. A reader with
 * `scopes` (a personal access token, a webhook) sees only the events those scopes may read.
 */
export interface Reader {
  userId: string;
  admin: boolean;
  scopes?: readonly Scope[];
  /**
   * The projects the reader is a member of now, for readers that filter events in memory (a live
   * stream): read for each batch handed out (projectsOfReaders), so a removed member's stream stops
   * with the next event. Queries of the log decide it in SQL instead.
   */
  projects?: ReadonlySet<string>;
}
export const readerOf = (principal: Principal): Reader => ({
  userId: principal.userId,
  admin: isAdmin(principal),
  ...(principal.token && { scopes: principal.token.scopes }),
});

/** Whether the reader's scopes let it read what an event of `type` carries. */
export function readsEventType(reader: Pick<Reader, 'scopes'>, type: string): boolean {
  if (!reader.scopes) return true;
  const needed = scopeToReadEvent(type);
  return needed !== undefined && grantsScope(reader.scopes, needed);
}

/** The event types a reader with scopes may read, for the log's queries. */
const readableTypes = (reader: Reader): string[] => EVENT_TYPES.filter((type) => readsEventType(reader, type));

export interface LoggedEvent {
  event: Event;
  position: Position;
  audience: string[];
  /** The project whose current members read the event besides its audience. */
  projectId: string | null;
}

/** What an event row holds, in whatever way a query names it. */
interface StoredEvent {
  id: string;
  type: string;
  occurredAt: Date;
  actorId: string | null;
  data: unknown;
}

/**
 * The stored event as the contract's Event; undefined when it does not read as one (a writer that
 * drifted from the contract, a row edited by hand). Such an event is logged at `error` and counted
 * (`events_unreadable_total`), and its reader moves on: one bad event must not stall every live
 * stream, fail every page of the changes feed that holds it, or be retried for ever.
 */
export function readableEvent(ctx: AppContext, stored: StoredEvent, reader: 'log' | 'webhook'): Event | undefined {
  const parsed = EventSchema.safeParse({
    id: stored.id,
    type: stored.type,
    occurredAt: stored.occurredAt.toISOString(),
    actorId: stored.actorId,
    data: stored.data,
  });
  if (parsed.success) return parsed.data;
  eventMetrics(ctx).unreadableEvents.inc({ reader });
  ctx.logger.error(
    { eventId: stored.id, eventType: stored.type, reader, issues: parsed.error.issues.slice(0, 5) },
    'an event in the log does not read as the contract says: skipped',
  );
  return undefined;
}

/** An event as the log's reads select it. */
interface EventRow extends StoredEvent {
  audience: string[];
  projectId: string | null;
  txid: string;
  seq: string;
}

function toLogged(ctx: AppContext, row: EventRow): LoggedEvent | undefined {
  const event = readableEvent(ctx, row, 'log');
  return event && { event, position: positionOf(row), audience: row.audience, projectId: row.projectId };
}

/** Whether `reader` sees an event: admins all, others those naming them and those of their projects. */
export const visibleTo = (reader: Reader, logged: { audience: string[]; projectId: string | null }): boolean =>
  reader.admin ||
  logged.audience.includes(reader.userId) ||
  (logged.projectId !== null && reader.projects?.has(logged.projectId) === true);

/**
 * The events `userId` reads as a non-admin, as a condition on the row `e`: those naming them, and
 * those of the projects they are a member of now (one probe of project_members' primary key).
 */
export const eventReadableBy = (userId: string) =>
  sql<boolean>`(e.audience @> ARRAY[${userId}::uuid] OR EXISTS (
    SELECT 1 FROM project_members pm WHERE pm.project_id = e.project_id AND pm.user_id = ${userId}::uuid))`;

/** Of `userIds`, the projects each is a member of among `projectIds`, now: for readers that filter in memory. */
export async function projectsOfReaders(
  ctx: AppContext,
  userIds: readonly string[],
  projectIds: readonly string[],
): Promise<Map<string, Set<string>>> {
  const byUser = new Map<string, Set<string>>(userIds.map((id) => [id, new Set<string>()]));
  if (userIds.length === 0 || projectIds.length === 0) return byUser;
  const rows = await ctx.db.sql.all(
    tables
      .selectFrom('project_members')
      .select(['project_members.user_id as userId', 'project_members.project_id as projectId'])
      .where('project_members.user_id', '=', sql<string>`ANY(${[...new Set(userIds)]}::uuid[])`)
      .where('project_members.project_id', '=', sql<string>`ANY(${[...new Set(projectIds)]}::uuid[])`),
  );
  for (const row of rows) byUser.get(row.userId)?.add(row.projectId);
  return byUser;
}

/**
 * Whether `reader` may know who made the change: that user, an admin, the task's owner or assignee,
 * or a member of the event's project (members see each other in its member list).
 */
function actorKnownTo(reader: Reader, event: Event, audience: string[], projectId: string | null): boolean {
  if (reader.admin || event.actorId === reader.userId || projectId !== null) return true;
  switch (event.type) {
    case 'task.created':
    case 'task.updated':
      return event.data.task.ownerId === reader.userId || event.data.task.assigneeId === reader.userId;
    // Their audience is the task's owner and assignee at the time of the change.
    case 'task.deleted':
    case 'attachment.created':
    case 'attachment.deleted':
    case 'comment.created':
    case 'comment.updated':
    case 'comment.deleted':
      return audience.includes(reader.userId);
    // Their audience is the project's members, who see each other in its member list.
    case 'project.created':
    case 'project.updated':
    case 'project.deleted':
    case 'project.member_added':
    case 'project.member_updated':
    case 'project.member_removed':
      return audience.includes(reader.userId);
    default:
      return false;
  }
}

/** The event as `reader` receives it (stream, changes feed, webhooks): the actor only where they may know it. */
export const eventSeenBy = (
  reader: Reader,
  logged: { event: Event; audience: string[]; projectId: string | null },
): Event =>
  actorKnownTo(reader, logged.event, logged.audience, logged.projectId)
    ? logged.event
    : { ...logged.event, actorId: null };

export interface LogPage {
  events: LoggedEvent[];
  /** Where the next read starts: after the last event returned, or the horizon when the page was not full. */
  next: Position;
}

/**
 * Up to `limit` events after `after` that `reader` may see (every reader when undefined), in log
 * order, stopping below the horizon: the oldest transaction running when the query started. So a
 * transaction that commits late is read later, never skipped. One statement, one snapshot.
 */
export async function readLog(ctx: AppContext, after: Position, limit: number, reader?: Reader): Promise<LogPage> {
  const page = await readLogOnce(ctx, after, limit, reader);
  // An unreadable event skipped leaves the page short, and a short page says "up to date": fill it.
  while (page.skipped > 0 && page.full && page.events.length < limit) {
    const more = await readLogOnce(ctx, page.next, limit - page.events.length, reader);
    page.events.push(...more.events);
    Object.assign(page, { next: more.next, skipped: more.skipped, full: more.full });
  }
  return { events: page.events, next: page.next };
}

/** The columns of an event as the log's reads select them, from the row `e`. */
const EVENT_COLUMNS = [
  'e.id',
  'e.type',
  'e.occurred_at as occurredAt',
  'e.actor_id as actorId',
  'e.data',
  'e.audience',
  'e.project_id as projectId',
  'e.txid',
  'e.seq',
] as const;

/**
 * The statement of one page of the log: the horizon, and up to `limit` events after `after` below it
 * that `reader` may see (every reader when undefined), in log order.
 *
 * A non-admin's page is two reads merged, each along its own index, rather than the log walked from
 * `after` with everyone else's events filtered out (test/event-plans.test.ts): the events naming
 * them (the audience's GIN index), and per project of theirs now (project_members' (user_id,
 * project_id) index) one range of the (project_id, txid, seq) index.
 */
export function logPageQuery(after: Position, limit: number, reader: Reader | undefined) {
  const afterTxid = sql<string>`${after.txid.toString()}::bigint`;
  const afterSeq = sql<string>`${after.seq.toString()}::bigint`;
  return tables
    .with('h', (db) => db.selectNoFrom(HORIZON.as('horizon')))
    .selectFrom('h')
    .leftJoinLateral(
      (eb) => {
        // Filtered in the scans, not after: a page of events the reader may not read would end its reading early.
        const readable = sql<boolean>`e.txid < h.horizon AND ${
          reader?.scopes ? sql`e.type = ANY(${readableTypes(reader)}::text[])` : sql`TRUE`
        }`;
        if (!reader || reader.admin)
          return eb
            .selectFrom('events as e')
            .select(EVENT_COLUMNS)
            .where(readable)
            .where(sql<boolean>`(e.txid, e.seq) > (${afterTxid}, ${afterSeq})`)
            .orderBy('e.txid')
            .orderBy('e.seq')
            .limit(limit)
            .as('e');
        const me = reader.userId;
        // Those of a project of theirs come from the project's range below, not twice.
        const named = eb
          .selectFrom('events as e')
          .select(EVENT_COLUMNS)
          .where(readable)
          .where(sql<boolean>`e.audience @> ARRAY[${me}::uuid]`)
          .where(sql<boolean>`(e.txid, e.seq) > (${afterTxid}, ${afterSeq})`)
          .where(
            sql<boolean>`(e.project_id IS NULL OR NOT EXISTS (
              SELECT 1 FROM project_members pm WHERE pm.project_id = e.project_id AND pm.user_id = ${me}::uuid))`,
          )
          .orderBy('e.txid')
          .orderBy('e.seq')
          .limit(limit);
        const ofProjects = eb
          .selectFrom('project_members as membership')
          .innerJoinLateral(
            (projects) =>
              projects
                .selectFrom('events as e')
                .select(EVENT_COLUMNS)
                .where(readable)
                .whereRef('e.project_id', '=', 'membership.project_id')
                .where(sql<boolean>`(e.project_id, e.txid, e.seq) > (membership.project_id, ${afterTxid}, ${afterSeq})`)
                .orderBy('e.txid')
                .orderBy('e.seq')
                .limit(limit)
                .as('picked'),
            (join) => join.onTrue(),
          )
          .selectAll('picked')
          .where('membership.user_id', '=', me)
          .orderBy('picked.txid')
          .orderBy('picked.seq')
          .limit(limit);
        return eb
          .selectFrom(sql<EventRow>`((${named}) UNION ALL (${ofProjects}))`.as('e'))
          .selectAll('e')
          .orderBy('e.txid')
          .orderBy('e.seq')
          .limit(limit)
          .as('e');
      },
      (join) => join.onTrue(),
    )
    .select([
      'h.horizon',
      'e.id',
      'e.type',
      'e.occurredAt',
      'e.actorId',
      'e.data',
      'e.audience',
      'e.projectId',
      'e.txid',
      'e.seq',
    ]);
}

async function readLogOnce(
  ctx: AppContext,
  after: Position,
  limit: number,
  reader: Reader | undefined,
): Promise<LogPage & { skipped: number; full: boolean }> {
  const rows = await ctx.db.sql.all(logPageQuery(after, limit, reader));
  const horizon = BigInt(rows[0]?.horizon ?? 0);
  // Without an event, the left join still answers the horizon, in a row of nulls.
  const read = rows.flatMap(({ id, type, occurredAt, actorId, data, audience, projectId, txid, seq }) =>
    id === null || type === null || occurredAt === null || audience === null || txid === null || seq === null
      ? []
      : [{ id, type, occurredAt, actorId, data, audience, projectId, txid, seq }],
  );
  const events = read.flatMap((row) => toLogged(ctx, row) ?? []);
  // Past the last row read, an unreadable one included: the next read never meets it again.
  const last = read[read.length - 1];
  const full = read.length === limit;
  const next = full && last ? positionOf(last) : later(after, { txid: horizon, seq: 0n });
  return { events, next, skipped: read.length - events.length, full };
}

/** The position of an event `reader` may see, by id; undefined when it is not (or no longer) in the log, or not theirs. */
export async function positionSeenBy(ctx: AppContext, reader: Reader, eventId: string): Promise<Position | undefined> {
  const row = await ctx.db.sql.first(
    tables
      .selectFrom('events as e')
      .select(['e.txid', 'e.seq', 'e.type'])
      .where('e.id', '=', eventId)
      .where((eb) => (reader.admin ? eb.lit(true) : eventReadableBy(reader.userId))),
  );
  return row && readsEventType(reader, row.type) ? positionOf(row) : undefined;
}

/** A stored position (bigints, which pg reads as text). */
const positionOf = (row: { txid: string; seq: string }): Position => ({ txid: BigInt(row.txid), seq: BigInt(row.seq) });

/** The oldest transaction still running on the server: below it, the log is final. */
const HORIZON = sql<string>`(pg_snapshot_xmin(pg_current_snapshot())::text)::bigint`;

/** The current horizon as a position: where a reader that wants only what commits from now on starts. */
export async function currentHorizon(ctx: AppContext): Promise<Position> {
  const row = await ctx.db.sql.first(tables.selectNoFrom(HORIZON.as('horizon')));
  return { txid: BigInt(row?.horizon ?? 0), seq: 0n };
}

/** Whether the retention purge has deleted events after `position` (a reader there has missed some). */
export async function purgedPast(ctx: AppContext, position: Position): Promise<boolean> {
  const state = await ctx.db.sql.first(
    tables.selectFrom('event_log_state').select(['purged_txid as txid', 'purged_seq as seq']).where('id', '=', 1),
  );
  return state !== undefined && isAfter(positionOf(state), position);
}

/**
 * Deletes events older than the retention, as a prefix of the log, and records how far it went.
 * Every instance may run it: the state row is updated under its lock.
 */
export async function purgeExpiredEvents(ctx: AppContext, now = new Date()): Promise<number> {
  const cutoff = new Date(now.getTime() - ctx.config.events.retentionDays * 24 * 3600 * 1000);
  return ctx.db.sql.transaction(async (tx) => {
    const end = await tx.first(
      tables
        .selectFrom('events')
        .select(['txid', 'seq'])
        .where('occurred_at', '<', cutoff)
        .orderBy('txid', 'desc')
        .orderBy('seq', 'desc')
        .limit(1),
    );
    if (!end) return 0;
    await tx.write(
      tables
        .insertInto('event_log_state')
        .values({ id: 1, purged_txid: end.txid, purged_seq: end.seq })
        .onConflict((conflict) =>
          conflict
            .column('id')
            .doUpdateSet({
              purged_txid: (eb) => eb.ref('excluded.purged_txid'),
              purged_seq: (eb) => eb.ref('excluded.purged_seq'),
            })
            .where(
              sql<boolean>`(event_log_state.purged_txid, event_log_state.purged_seq) < (excluded.purged_txid, excluded.purged_seq)`,
            ),
        ),
    );
    return tx.write(
      tables.deleteFrom('events').where(sql<boolean>`(txid, seq) <= (${end.txid}::bigint, ${end.seq}::bigint)`),
    );
  });
}
