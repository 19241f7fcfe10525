import { sql } from 'kysely';
import type { AppContext } from '../context.js';
import { rawQuery, tables } from '../db/query.js';

/** Attempts in flight to one target host, across all instances, so one slow host cannot take every slot. */
export const MAX_IN_FLIGHT_PER_HOST = 2;
/** How many due attempts one claim looks at, at most. */
const CANDIDATES = 500;

export interface Claimed {
  id: string;
  webhookId: string;
  eventId: string;
}

interface Row {
  id: string;
  webhook_id: string;
  event_id: string;
  owner_id: string;
  url: string;
}

/** The key attempts are counted under per target host: the URL's host name (or address) without the port. */
function hostKey(url: string): string {
  return URL.canParse(url) ? new URL(url).hostname : url;
}

const count = (counts: Map<string, number>, key: string) => counts.get(key) ?? 0;
const increment = (counts: Map<string, number>, key: string) => counts.set(key, count(counts, key) + 1);

/**
 * Takes up to `free` of the candidates (in their round-robin order), one at a time, each from the
 * user with the fewest attempts in flight who has one allowed: a freed slot goes to whoever holds
 * the fewest, so users who flood their own slots with dead receivers cannot refill them ahead of
 * another user's first event however old their backlog. Counts what it takes in `perHost`, `perUser`.
 */
function pickFairly(
  candidates: Row[],
  free: number,
  perHost: Map<string, number>,
  perUser: Map<string, number>,
  maxPerUser: number,
): Row[] {
  const queues = new Map<string, Row[]>();
  for (const row of candidates) {
    const queue = queues.get(row.owner_id);
    if (queue) queue.push(row);
    else queues.set(row.owner_id, [row]);
  }
  const picked: Row[] = [];
  while (picked.length < free) {
    let best: { queue: Row[]; index: number; held: number } | undefined;
    for (const [owner, queue] of queues) {
      const held = count(perUser, owner);
      if (held >= maxPerUser || (best && held >= best.held)) continue;
      const index = queue.findIndex((row) => count(perHost, hostKey(row.url)) < MAX_IN_FLIGHT_PER_HOST);
      if (index >= 0) best = { queue, index, held };
    }
    if (!best) break;
    const [row] = best.queue.splice(best.index, 1);
    if (!row) break;
    increment(perHost, hostKey(row.url));
    increment(perUser, row.owner_id);
    picked.push(row);
  }
  return picked;
}

/**
 * Claims up to `free` due attempts for this instance, fairly: each slot to the user with the fewest
 * attempts in flight, a user's own round-robin over their webhooks; none is taken for a host that
 * already has MAX_IN_FLIGHT_PER_HOST attempts in flight, or for a user who has WEBHOOK_MAX_IN_FLIGHT_PER_USER,
 * counted over every instance. So a user's dead receivers hold at most their own slots, and another
 * user's event is taken as soon as it is due. One claim runs at a time across instances (a
 * transaction-scoped advisory lock; a claim is three short statements), so the counts it decides
 * on are current; the claimed attempts are leased (`delivering`) before the HTTP calls start, and
 * a claim that runs out (the instance died) makes the attempt due again.
 * `blocked` tells whether due attempts were left waiting for a slot held elsewhere.
 */
export async function claimFairly(
  ctx: AppContext,
  leaseId: string,
  free: number,
): Promise<{ claimed: Claimed[]; blocked: boolean }> {
  const { maxInFlightPerUser, timeoutMs, leaseGraceSeconds } = ctx.config.webhooks;
  const leaseSeconds = Math.ceil(timeoutMs / 1000) + leaseGraceSeconds;
  return ctx.db.sql.transaction(async (tx) => {
    await tx.all(rawQuery(sql`SELECT pg_advisory_xact_lock(hashtextextended('webhook delivery claims', 0))`));
    const inFlight = await tx.all(
      tables
        .selectFrom('webhook_deliveries as d')
        .innerJoin('webhooks as w', 'w.id', 'd.webhook_id')
        .select(['w.owner_id', 'w.url'])
        .where('d.state', '=', 'delivering')
        .where('d.lease_until', '>=', sql<Date>`now()`),
    );
    const candidates = await tx.all(
      rawQuery(sql<Row>`WITH due AS (
         SELECT d.id, d.webhook_id, d.event_id, coalesce(d.next_attempt_at, d.lease_until) AS due_at,
                row_number() OVER (PARTITION BY d.webhook_id ORDER BY coalesce(d.next_attempt_at, d.lease_until), d.id) AS webhook_turn
         FROM webhook_deliveries d
         WHERE (d.state = 'pending' AND d.next_attempt_at <= now()) OR (d.state = 'delivering' AND d.lease_until < now())
       ), turns AS (
         SELECT due.*, w.owner_id, w.url,
                row_number() OVER (PARTITION BY w.owner_id ORDER BY due.webhook_turn, due.due_at, due.id) AS owner_turn
         FROM due JOIN webhooks w ON w.id = due.webhook_id
         WHERE due.webhook_turn <= ${MAX_IN_FLIGHT_PER_HOST}
       )
       SELECT id::text, webhook_id::text, event_id::text, owner_id::text, url FROM turns
       ORDER BY owner_turn, due_at, id
       LIMIT ${Math.max(CANDIDATES, 4 * free)}`),
    );
    const perHost = new Map<string, number>();
    const perUser = new Map<string, number>();
    for (const row of inFlight) {
      increment(perHost, hostKey(row.url));
      increment(perUser, row.owner_id);
    }
    const picked = pickFairly(candidates, free, perHost, perUser, maxInFlightPerUser);
    const blocked = candidates.some(
      (row) =>
        !picked.includes(row) &&
        (count(perHost, hostKey(row.url)) >= MAX_IN_FLIGHT_PER_HOST ||
          count(perUser, row.owner_id) >= maxInFlightPerUser),
    );
    if (picked.length === 0) return { claimed: [], blocked };
    const claimed = await tx.all(
      rawQuery(sql<{ id: string }>`WITH mine AS (
         SELECT id FROM webhook_deliveries
         WHERE id = ANY(${picked.map((row) => row.id)}::uuid[]) AND ((state = 'pending' AND next_attempt_at <= now()) OR (state = 'delivering' AND lease_until < now()))
         FOR UPDATE SKIP LOCKED
       )
       UPDATE webhook_deliveries d
       SET state = 'delivering', lease_id = ${leaseId}::uuid, lease_until = now() + make_interval(secs => ${leaseSeconds})
       FROM mine WHERE d.id = mine.id
       RETURNING d.id::text AS id`),
    );
    const taken = new Set(claimed.map((row) => row.id));
    return {
      claimed: picked
        .filter((row) => taken.has(row.id))
        .map((row) => ({ id: row.id, webhookId: row.webhook_id, eventId: row.event_id })),
      blocked,
    };
  });
}
