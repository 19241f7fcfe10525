// The tags' writes, each one pipelined transaction (SqlDatabase.pipeline) as the tasks' are
// (server/tasks/store.ts): the rows locked first, tag before task, then one statement that decides
// every check on the locked rows and writes, and the events settled in the same round trip.
//
// Locks, always in this order: a tag (FOR SHARE to link it, FOR NO KEY UPDATE to change it, FOR
// UPDATE to delete it), then its tasks in id order. A link and a rename of its tag therefore run one
// after the other, so a task's events and version follow every change of the tags it shows.
import { v7 as uuidv7 } from 'uuid';
import type { AppContext } from '../context.js';
import { rowsOf, type Statement } from '../db/sql.js';
import { EVENT_WRITES, UUIDV7_SQL } from '../events/outbox.js';
import { isAdmin, type Principal } from '../http/principal.js';
import { claimBounds, claimLock, hasRoom, type QuotaClaim } from '../quotas.js';
import { audience, iso, settleTaskEvents, taskEventStub, touchTaskOf, visibleTo } from '../tasks/store.js';
import type { TagRow } from './serialize.js';

/** The columns of a TagRow, of the tag row `g`. */
const tagColumns = (g: string) =>
  `${g}.id, ${g}.owner_id AS "ownerId", ${g}.name, ${g}.name_key AS "nameKey", ${g}.color, ${g}.created_at AS "createdAt"`;

/** The contract's Tag of the row `g` as jsonb, for its events (serializeTag's shape). */
const tagJson = (g: string) =>
  `jsonb_build_object('id', ${g}.id, 'ownerId', ${g}.owner_id, 'name', ${g}.name, 'color', ${g}.color, 'createdAt', ${iso(`${g}.created_at`)})`;

/** The tag rule in SQL for the caller `me`: admins see every tag, others their own. */
const tagVisibleTo = (principal: Principal, g: string, me: string) =>
  isAdmin(principal) ? 'true' : `${g}.owner_id = ${me}`;

/** Locks the tasks carrying the tag ($1), in id order, if the caller ($2) may see the tag. */
const lockTasksOf = (principal: Principal, tagId: string): Statement => ({
  text: `SELECT 1 FROM tasks WHERE id IN (
           SELECT tt.task_id FROM task_tags tt JOIN tags g ON g.id = tt.tag_id WHERE tt.tag_id = $1 AND ${tagVisibleTo(principal, 'g', '$2')})
         ORDER BY id FOR NO KEY UPDATE`,
  values: isAdmin(principal) ? [tagId] : [tagId, principal.userId],
});

export interface NewTag {
  name: string;
  nameKey: string;
  color: string;
}

export type TagCreateOutcome = { kind: 'created'; row: TagRow } | { kind: 'no_room' };

/**
 * Inserts a tag and its `tag.created` event in one round trip, if the owner's holdings leave room
 * for the claim (whose lock on the owner's row comes first). A name the owner has already fails
 * with a unique violation.
 */
export async function insertTag(
  ctx: AppContext,
  principal: Principal,
  tag: NewTag,
  claim: QuotaClaim,
  now: Date,
): Promise<TagCreateOutcome> {
  const eventId = uuidv7();
  const lock = claimLock(claim, principal.userId);
  const { room, limit } = claimBounds(claim, 1n);
  const results = await ctx.db.sql.pipelineList([
    ...lock,
    { text: 'SAVEPOINT write' },
    {
      text: `
        WITH created AS (
          INSERT INTO tags (id, owner_id, name, name_key, color, created_at)
          SELECT $1, $2, $3, $4, $5, $6 WHERE ${hasRoom('tags', '$2', '$8', '$9')}
          RETURNING *
        ),
        new_events AS (
          SELECT $7::uuid AS id, 'tag.created' AS type, jsonb_build_object('tag', ${tagJson('g')}) AS data,
                 ARRAY[g.owner_id] AS audience, $2::uuid AS actor_id, 1 AS n
          FROM created g
        ),
        ${EVENT_WRITES}
        SELECT ${tagColumns('g')} FROM created g`,
      values: [uuidv7(), principal.userId, tag.name, tag.nameKey, tag.color, now, eventId, room, limit],
    },
    ...settleTaskEvents,
  ]);
  const [row] = rowsOf<TagRow>(results[lock.length + 1]);
  return row ? { kind: 'created', row } : { kind: 'no_room' };
}

export type TagChangeOutcome = { kind: 'not_found' } | { kind: 'changed' | 'unchanged'; row: TagRow };

/**
 * Renames and recolours the tag with it and its tasks locked, writing only what was sent (so
 * concurrent changes all stay): the tag, a new version of every task carrying it (they show its
 * name and colour), `tag.updated` and a `task.updated` for each, in one round trip.
 */
export async function updateTag(
  ctx: AppContext,
  principal: Principal,
  tagId: string,
  change: { name?: string; nameKey?: string; color?: string },
): Promise<TagChangeOutcome> {
  const eventId = uuidv7();
  const results = await ctx.db.sql.pipelineList([
    { text: 'SELECT 1 FROM tags WHERE id = $1 FOR NO KEY UPDATE', values: [tagId] },
    lockTasksOf(principal, tagId),
    { text: 'SAVEPOINT write' },
    {
      text: `
        WITH verdict AS (
          SELECT cur.id, coalesce($3, cur.name) AS name, coalesce($4, cur.name_key) AS name_key, coalesce($5, cur.color) AS color, CASE
              WHEN ${tagVisibleTo(principal, 'cur', '$2')} IS NOT TRUE THEN 'not_found'
              WHEN coalesce($3, cur.name) = cur.name AND coalesce($5, cur.color) = cur.color THEN 'unchanged'
              ELSE 'apply' END AS outcome
          FROM tags cur WHERE cur.id = $1
        ),
        updated AS (
          UPDATE tags g SET name = v.name, name_key = v.name_key, color = v.color
          FROM verdict v WHERE g.id = v.id AND v.outcome = 'apply'
          RETURNING g.*
        ),
        touched AS (
          UPDATE tasks t SET version = t.version + 1, updated_at = $6
          FROM task_tags tt, updated u WHERE tt.tag_id = u.id AND t.id = tt.task_id
          RETURNING t.id, t.owner_id, t.assignee_id
        ),
        new_events AS (
          SELECT $7::uuid AS id, 'tag.updated' AS type, jsonb_build_object('tag', ${tagJson('u')}) AS data,
                 ARRAY[u.owner_id] AS audience, $2::uuid AS actor_id, 0::bigint AS n
          FROM updated u
          UNION ALL
          SELECT ${UUIDV7_SQL}, 'task.updated', ${taskEventStub('t')}, ${audience('t')}, $2::uuid, row_number() OVER (ORDER BY t.id)
          FROM touched t
        ),
        ${EVENT_WRITES}
        SELECT outcome FROM verdict`,
      values: [
        tagId,
        principal.userId,
        change.name ?? null,
        change.nameKey ?? null,
        change.color ?? null,
        new Date(),
        eventId,
      ],
    },
    ...settleTaskEvents,
    { text: `SELECT ${tagColumns('g')} FROM tags g WHERE g.id = $1`, values: [tagId] },
  ]);
  const [verdict] = rowsOf<{ outcome: 'not_found' | 'unchanged' | 'apply' }>(results[3]);
  const [row] = rowsOf<TagRow>(results[results.length - 1]);
  if (!verdict || !row || verdict.outcome === 'not_found') return { kind: 'not_found' };
  return { kind: verdict.outcome === 'apply' ? 'changed' : 'unchanged', row };
}

/**
 * Deletes the tag, locked against links too, so the tasks carrying it are all of them: each gets a
 * new version and a `task.updated` without it, after the `tag.deleted`, in one round trip. False
 * when the caller cannot see such a tag.
 */
export async function removeTag(ctx: AppContext, principal: Principal, tagId: string): Promise<boolean> {
  const eventId = uuidv7();
  const results = await ctx.db.sql.pipelineList([
    { text: 'SELECT 1 FROM tags WHERE id = $1 FOR UPDATE', values: [tagId] },
    lockTasksOf(principal, tagId),
    { text: 'SAVEPOINT write' },
    {
      text: `
        WITH doomed AS (SELECT cur.id, cur.owner_id FROM tags cur WHERE cur.id = $1 AND ${tagVisibleTo(principal, 'cur', '$2')}),
        touched AS (
          UPDATE tasks t SET version = t.version + 1, updated_at = $3
          FROM task_tags tt, doomed d WHERE tt.tag_id = d.id AND t.id = tt.task_id
          RETURNING t.id, t.owner_id, t.assignee_id
        ),
        deleted AS (DELETE FROM tags g USING doomed d WHERE g.id = d.id RETURNING g.id, g.owner_id),
        new_events AS (
          SELECT $4::uuid AS id, 'tag.deleted' AS type, jsonb_build_object('tagId', d.id) AS data,
                 ARRAY[d.owner_id] AS audience, $2::uuid AS actor_id, 0::bigint AS n
          FROM deleted d
          UNION ALL
          SELECT ${UUIDV7_SQL}, 'task.updated', ${taskEventStub('t')}, ${audience('t')}, $2::uuid, row_number() OVER (ORDER BY t.id)
          FROM touched t
        ),
        ${EVENT_WRITES}
        SELECT count(*)::int AS deleted FROM deleted`,
      values: [tagId, principal.userId, new Date(), eventId],
    },
    ...settleTaskEvents,
  ]);
  const [outcome] = rowsOf<{ deleted: number }>(results[3]);
  return outcome?.deleted === 1;
}

export type LinkOutcome = { kind: 'no_task' } | { kind: 'no_tag' } | { kind: 'linked' | 'already'; row: TagRow };

/**
 * Links one of the task owner's tags (even an admin may use only the owner's: a task never carries
 * another user's tag) with the tag and the task locked: the link, the task's new version and its
 * `task.updated`, in one round trip. A link already there changes nothing.
 */
export async function linkTag(
  ctx: AppContext,
  principal: Principal,
  taskId: string,
  tagId: string,
): Promise<LinkOutcome> {
  const now = new Date();
  const results = await ctx.db.sql.pipelineList([
    { text: 'SELECT 1 FROM tags WHERE id = $1 FOR SHARE', values: [tagId] },
    { text: 'SELECT 1 FROM tasks WHERE id = $1 FOR NO KEY UPDATE', values: [taskId] },
    { text: 'SAVEPOINT write' },
    {
      text: `
        WITH verdict AS (
          SELECT cur.id, CASE
              WHEN ${visibleTo(principal, 'cur', '$3')} IS NOT TRUE THEN 'no_task'
              WHEN NOT EXISTS (SELECT 1 FROM tags g WHERE g.id = $2 AND g.owner_id = cur.owner_id) THEN 'no_tag'
              ELSE 'apply' END AS outcome
          FROM tasks cur WHERE cur.id = $1
        ),
        linked AS (
          INSERT INTO task_tags (task_id, tag_id, created_at) SELECT v.id, $2, $4 FROM verdict v WHERE v.outcome = 'apply'
          ON CONFLICT DO NOTHING RETURNING task_id
        ),
        ${touchTaskOf('linked', { actor: '$3', now: '$4', eventId: '$5' })}
        SELECT outcome, (SELECT count(*) FROM linked)::int AS changed FROM verdict`,
      values: [taskId, tagId, principal.userId, now, uuidv7()],
    },
    ...settleTaskEvents,
    { text: `SELECT ${tagColumns('g')} FROM tags g WHERE g.id = $1`, values: [tagId] },
  ]);
  const [verdict] = rowsOf<{ outcome: 'no_task' | 'no_tag' | 'apply'; changed: number }>(results[3]);
  const [row] = rowsOf<TagRow>(results[results.length - 1]);
  if (!verdict || verdict.outcome === 'no_task') return { kind: 'no_task' };
  if (verdict.outcome === 'no_tag' || !row) return { kind: 'no_tag' };
  return { kind: verdict.changed === 1 ? 'linked' : 'already', row };
}

export type UnlinkOutcome = 'no_task' | 'not_linked' | 'unlinked';

/** Takes a tag off a task with the task locked: the task's new version and its `task.updated`, in one round trip. */
export async function unlinkTag(
  ctx: AppContext,
  principal: Principal,
  taskId: string,
  tagId: string,
): Promise<UnlinkOutcome> {
  const results = await ctx.db.sql.pipelineList([
    { text: 'SELECT 1 FROM tasks WHERE id = $1 FOR NO KEY UPDATE', values: [taskId] },
    { text: 'SAVEPOINT write' },
    {
      text: `
        WITH verdict AS (SELECT cur.id, ${visibleTo(principal, 'cur', '$3')} IS TRUE AS visible FROM tasks cur WHERE cur.id = $1),
        unlinked AS (
          DELETE FROM task_tags tt USING verdict v WHERE v.visible AND tt.task_id = v.id AND tt.tag_id = $2 RETURNING tt.task_id
        ),
        ${touchTaskOf('unlinked', { actor: '$3', now: '$4', eventId: '$5' })}
        SELECT visible, (SELECT count(*) FROM unlinked)::int AS changed FROM verdict`,
      values: [taskId, tagId, principal.userId, new Date(), uuidv7()],
    },
    ...settleTaskEvents,
  ]);
  const [verdict] = rowsOf<{ visible: boolean; changed: number }>(results[2]);
  if (!verdict?.visible) return 'no_task';
  return verdict.changed === 1 ? 'unlinked' : 'not_linked';
}
