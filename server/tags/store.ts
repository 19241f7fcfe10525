// The tags' writes, each one pipelined transaction (SqlDatabase.pipeline) as the tasks' are
// (server/tasks/store.ts): the rows locked first, tag before task, then one statement that decides
// every check on the locked rows and writes, and the events settled in the same round trip.
//
// Locks, always in this order: a tag (FOR SHARE to link it, FOR NO KEY UPDATE to change it, FOR
// UPDATE to delete it), then its tasks in id order. A link and a rename of its tag therefore run one
// after the other, so a task's events and version follow every change of the tags it shows.
import { expressionBuilder, sql, type RawBuilder } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import type { AppContext } from '../context.js';
import { rawQuery, tables, type DB } from '../db/query.js';
import type { Statement } from '../db/sql.js';
import { EVENT_WRITES, UUIDV7_SQL } from '../events/outbox.js';
import { isAdmin, type Principal } from '../http/principal.js';
import { claimBounds, claimLock, holdsRoom, type QuotaClaim } from '../quotas.js';
import { visibleHere, visibleTasks, writableHere } from '../tasks/queries.js';
import { audience, iso, settleTaskEvents, taskEventStub, touchTaskOf } from '../tasks/change-events.js';
import { tagFits } from '../tasks/store.js';
import { tagVisibleTo, tagWritableBy } from './queries.js';
import { tagColumns, type TagRow } from './serialize.js';

/** Opens the subtransaction whose id places the write's events (settleTaskEvents ends it). */
const BEGIN_WRITE: Statement = { text: 'SAVEPOINT write' };

/** The contract's Tag of the row `g` as jsonb, for its events (serializeTag's shape). */
export const tagJson = (g: string): RawBuilder<unknown> =>
  sql.raw(
    `jsonb_build_object('id', ${g}.id, 'ownerId', ${g}.owner_id, 'projectId', ${g}.project_id, 'name', ${g}.name, 'color', ${g}.color, 'createdAt', ${iso(`${g}.created_at`)})`,
  );

/** Who sees a tag's events besides admins: its owner, for a personal tag; a project's members read their tags' (outbox.ts). */
const tagAudience = (g: string) =>
  `(CASE WHEN ${g}.project_id IS NULL THEN ARRAY[${g}.owner_id] ELSE ARRAY[]::uuid[] END)`;

/** Whether the caller may see the row of `tags` in scope. */
const tagVisible = (principal: Principal) => tagVisibleTo(principal)(expressionBuilder<DB, 'tags'>());

/** Whether the caller may change the row of `tags` in scope. */
const tagWritable = (principal: Principal) => tagWritableBy(principal)(expressionBuilder<DB, 'tags'>());

/** The tag with this id, read back in the write's transaction. */
const tagById = (tagId: string) => tables.selectFrom('tags').select(tagColumns).where('tags.id', '=', tagId);

/** Locks the tasks carrying the tag, in id order, if the caller may see the tag. */
const lockTasksOf = (principal: Principal, tagId: string) =>
  tables
    .selectFrom('tasks')
    .select('tasks.id')
    .where(
      'tasks.id',
      'in',
      tables
        .selectFrom('task_tags')
        .innerJoin('tags', 'tags.id', 'task_tags.tag_id')
        .select('task_tags.task_id')
        .where('task_tags.tag_id', '=', tagId)
        .where(tagVisibleTo(principal)),
    )
    .orderBy('tasks.id')
    .forNoKeyUpdate();

/** The values touchTaskOf writes with, as a CTE `args` (it takes SQL expressions, not values). */
const touchArgs = (actorId: string, now: Date, eventId: string) =>
  sql`args AS (SELECT ${actorId}::uuid AS actor_id, ${now}::timestamptz AS written_at, ${eventId}::uuid AS event_id)`;

const FROM_ARGS = {
  actor: '(SELECT actor_id FROM args)',
  now: '(SELECT written_at FROM args)',
  eventId: '(SELECT event_id FROM args)',
};

export interface NewTag {
  name: string;
  nameKey: string;
  color: string;
  projectId: string | null;
}

export type TagCreateOutcome = { kind: 'created'; row: TagRow } | { kind: 'no_room' | 'unknown_project' };

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
  const id = uuidv7();
  const me = principal.userId;
  // Into a project: the caller's membership held shared, so a removal or demotion waits for the
  // create, or the create for it (and then finds it).
  const membership =
    tag.projectId === null
      ? []
      : [
          tables
            .selectFrom('project_members')
            .select('project_members.role')
            .where('project_members.project_id', '=', tag.projectId)
            .where('project_members.user_id', '=', me)
            .forShare(),
        ];
  const mayWrite = isAdmin(principal)
    ? sql`EXISTS (SELECT 1 FROM projects p WHERE p.id = ${tag.projectId}::uuid)`
    : sql`EXISTS (SELECT 1 FROM project_members pm WHERE pm.project_id = ${tag.projectId}::uuid AND pm.user_id = ${me}::uuid
                  AND pm.role IN ('editor', 'admin'))`;
  const { checks, created } = await ctx.db.sql.pipeline({
    lock: [...claimLock(claim, me), ...membership],
    begin: BEGIN_WRITE,
    checks: rawQuery(sql<{ project_ok: boolean }>`
      WITH project_ok AS (SELECT ${tag.projectId}::uuid IS NULL OR ${mayWrite} AS ok),
      created AS (
        INSERT INTO tags (id, owner_id, project_id, name, name_key, color, created_at)
        SELECT ${id}, ${me}, ${tag.projectId}::uuid, ${tag.name}, ${tag.nameKey}, ${tag.color}, ${now}
        FROM project_ok WHERE project_ok.ok AND ${holdsRoom('tags', me, claimBounds(claim, 1n))}
        RETURNING *
      ),
      new_events AS (
        SELECT ${uuidv7()}::uuid AS id, 'tag.created' AS type, jsonb_build_object('tag', ${tagJson('g')}) AS data,
               ${sql.raw(tagAudience('g'))} AS audience, ${me}::uuid AS actor_id, 1 AS n
        FROM created g
      ),
      ${sql.raw(EVENT_WRITES)}
      SELECT ok AS project_ok FROM project_ok`),
    settle: settleTaskEvents,
    created: tagById(id),
  });
  const [row] = created;
  if (checks[0]?.project_ok === false) return { kind: 'unknown_project' };
  return row ? { kind: 'created', row } : { kind: 'no_room' };
}

export type TagChangeOutcome = { kind: 'not_found' | 'forbidden' } | { kind: 'changed' | 'unchanged'; row: TagRow };

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
  const me = principal.userId;
  const [name, nameKey, color] = [change.name ?? null, change.nameKey ?? null, change.color ?? null];
  const { verdict, tag } = await ctx.db.sql.pipeline({
    lock: [
      tables.selectFrom('tags').select('id').where('id', '=', tagId).forNoKeyUpdate(),
      lockTasksOf(principal, tagId),
    ],
    begin: BEGIN_WRITE,
    verdict: rawQuery(sql<{ outcome: 'not_found' | 'forbidden' | 'unchanged' | 'apply' }>`
      WITH verdict AS (
        SELECT tags.id, coalesce(${name}, tags.name) AS name, coalesce(${nameKey}, tags.name_key) AS name_key,
            coalesce(${color}, tags.color) AS color, CASE
            WHEN (${tagVisible(principal)}) IS NOT TRUE THEN 'not_found'
            WHEN (${tagWritable(principal)}) IS NOT TRUE THEN 'forbidden'
            WHEN coalesce(${name}, tags.name) = tags.name AND coalesce(${color}, tags.color) = tags.color THEN 'unchanged'
            ELSE 'apply' END AS outcome
        FROM tags WHERE tags.id = ${tagId}
      ),
      updated AS (
        UPDATE tags g SET name = v.name, name_key = v.name_key, color = v.color
        FROM verdict v WHERE g.id = v.id AND v.outcome = 'apply'
        RETURNING g.*
      ),
      touched AS (
        UPDATE tasks t SET version = t.version + 1, updated_at = ${new Date()}
        FROM task_tags tt, updated u WHERE tt.tag_id = u.id AND t.id = tt.task_id
        RETURNING t.id, t.owner_id, t.assignee_id, t.project_id
      ),
      new_events AS (
        SELECT ${uuidv7()}::uuid AS id, 'tag.updated' AS type, jsonb_build_object('tag', ${tagJson('u')}) AS data,
               ${sql.raw(tagAudience('u'))} AS audience, ${me}::uuid AS actor_id, 0::bigint AS n
        FROM updated u
        UNION ALL
        SELECT ${sql.raw(UUIDV7_SQL)}, 'task.updated', ${sql.raw(taskEventStub('t'))}, ${sql.raw(audience('t'))}, ${me}::uuid,
               row_number() OVER (ORDER BY t.id)
        FROM touched t
      ),
      ${sql.raw(EVENT_WRITES)}
      SELECT outcome FROM verdict`),
    settle: settleTaskEvents,
    tag: tagById(tagId),
  });
  const [outcome, row] = [verdict[0]?.outcome, tag[0]];
  if (!row || outcome === undefined || outcome === 'not_found') return { kind: 'not_found' };
  if (outcome === 'forbidden') return { kind: 'forbidden' };
  return { kind: outcome === 'apply' ? 'changed' : 'unchanged', row };
}

/**
 * Deletes the tag, locked against links too, so the tasks carrying it are all of them: each gets a
 * new version and a `task.updated` without it, after the `tag.deleted`, in one round trip. False
 * when the caller cannot see such a tag.
 */
export async function removeTag(
  ctx: AppContext,
  principal: Principal,
  tagId: string,
): Promise<'not_found' | 'forbidden' | 'deleted'> {
  const me = principal.userId;
  const { verdict } = await ctx.db.sql.pipeline({
    lock: [tables.selectFrom('tags').select('id').where('id', '=', tagId).forUpdate(), lockTasksOf(principal, tagId)],
    begin: BEGIN_WRITE,
    verdict: rawQuery(sql<{ deleted: number; visible: number }>`
      WITH seen AS (
        SELECT tags.id, tags.owner_id, (${tagWritable(principal)}) IS TRUE AS writable
        FROM tags WHERE tags.id = ${tagId} AND ${tagVisible(principal)}
      ),
      doomed AS (SELECT seen.id, seen.owner_id FROM seen WHERE seen.writable),
      touched AS (
        UPDATE tasks t SET version = t.version + 1, updated_at = ${new Date()}
        FROM task_tags tt, doomed d WHERE tt.tag_id = d.id AND t.id = tt.task_id
        RETURNING t.id, t.owner_id, t.assignee_id, t.project_id
      ),
      deleted AS (DELETE FROM tags g USING doomed d WHERE g.id = d.id RETURNING g.id, g.owner_id, g.project_id),
      new_events AS (
        SELECT ${uuidv7()}::uuid AS id, 'tag.deleted' AS type, jsonb_build_object('tagId', d.id) AS data,
               ${sql.raw(tagAudience('d'))} AS audience, ${me}::uuid AS actor_id, 0::bigint AS n
        FROM deleted d
        UNION ALL
        SELECT ${sql.raw(UUIDV7_SQL)}, 'task.updated', ${sql.raw(taskEventStub('t'))}, ${sql.raw(audience('t'))}, ${me}::uuid,
               row_number() OVER (ORDER BY t.id)
        FROM touched t
      ),
      ${sql.raw(EVENT_WRITES)}
      SELECT (SELECT count(*) FROM deleted)::int AS deleted, (SELECT count(*) FROM seen)::int AS visible`),
    settle: settleTaskEvents,
  });
  if (verdict[0]?.deleted === 1) return 'deleted';
  return verdict[0]?.visible === 1 ? 'forbidden' : 'not_found';
}

export type LinkOutcome =
  { kind: 'no_task' | 'read_only' | 'no_tag' | 'unfit_tag' } | { kind: 'linked' | 'already'; row: TagRow };

/**
 * Links a tag that fits the task (tagFits: its project's own, or its owner's personal tag on a
 * personal task; even an admin may use no other) with the tag and the task locked: the link, the task's new version and its
 * `task.updated`, in one round trip. A link already there changes nothing.
 */
export async function linkTag(
  ctx: AppContext,
  principal: Principal,
  taskId: string,
  tagId: string,
): Promise<LinkOutcome> {
  const now = new Date();
  const { verdict, tag } = await ctx.db.sql.pipeline({
    lock: [
      tables.selectFrom('tags').select('id').where('id', '=', tagId).forShare(),
      tables.selectFrom('tasks').select('id').where('id', '=', taskId).forNoKeyUpdate(),
    ],
    begin: BEGIN_WRITE,
    verdict: rawQuery(sql<{ outcome: 'no_task' | 'read_only' | 'no_tag' | 'unfit_tag' | 'apply'; changed: number }>`
      WITH ${touchArgs(principal.userId, now, uuidv7())},
      verdict AS (
        SELECT tasks.id, CASE
            WHEN (${visibleHere(visibleTasks(principal))}) IS NOT TRUE THEN 'no_task'
            WHEN (${writableHere(visibleTasks(principal))}) IS NOT TRUE THEN 'read_only'
            WHEN EXISTS (
              SELECT 1 FROM tags g WHERE g.id = ${tagId} AND ${sql.raw(tagFits('g', 'tasks.owner_id', 'tasks.project_id'))}
            ) THEN 'apply'
            -- A personal task takes only its owner's tags: any other is not found, as it always was.
            WHEN tasks.project_id IS NOT NULL AND EXISTS (SELECT 1 FROM tags WHERE tags.id = ${tagId} AND ${tagVisible(principal)})
              THEN 'unfit_tag'
            ELSE 'no_tag' END AS outcome
        FROM tasks WHERE tasks.id = ${taskId}
      ),
      linked AS (
        INSERT INTO task_tags (task_id, tag_id, created_at) SELECT v.id, ${tagId}, ${now} FROM verdict v WHERE v.outcome = 'apply'
        ON CONFLICT DO NOTHING RETURNING task_id
      ),
      ${sql.raw(touchTaskOf('linked', FROM_ARGS))}
      SELECT outcome, (SELECT count(*) FROM linked)::int AS changed FROM verdict`),
    settle: settleTaskEvents,
    tag: tagById(tagId),
  });
  const [outcome, row] = [verdict[0], tag[0]];
  if (!outcome || outcome.outcome === 'no_task') return { kind: 'no_task' };
  if (outcome.outcome !== 'apply') return { kind: outcome.outcome };
  if (!row) return { kind: 'no_tag' };
  return { kind: outcome.changed === 1 ? 'linked' : 'already', row };
}

export type UnlinkOutcome = 'no_task' | 'read_only' | 'not_linked' | 'unlinked';

/** Takes a tag off a task with the task locked: the task's new version and its `task.updated`, in one round trip. */
export async function unlinkTag(
  ctx: AppContext,
  principal: Principal,
  taskId: string,
  tagId: string,
): Promise<UnlinkOutcome> {
  const { verdict } = await ctx.db.sql.pipeline({
    lock: tables.selectFrom('tasks').select('id').where('id', '=', taskId).forNoKeyUpdate(),
    begin: BEGIN_WRITE,
    verdict: rawQuery(sql<{ visible: boolean; writable: boolean; changed: number }>`
      WITH ${touchArgs(principal.userId, new Date(), uuidv7())},
      verdict AS (
        SELECT tasks.id, (${visibleHere(visibleTasks(principal))}) IS TRUE AS visible, (${writableHere(visibleTasks(principal))}) IS TRUE AS writable
        FROM tasks WHERE tasks.id = ${taskId}
      ),
      unlinked AS (
        DELETE FROM task_tags tt USING verdict v
        WHERE v.visible AND v.writable AND tt.task_id = v.id AND tt.tag_id = ${tagId} RETURNING tt.task_id
      ),
      ${sql.raw(touchTaskOf('unlinked', FROM_ARGS))}
      SELECT visible, writable, (SELECT count(*) FROM unlinked)::int AS changed FROM verdict`),
    settle: settleTaskEvents,
  });
  const [outcome] = verdict;
  if (!outcome?.visible) return 'no_task';
  if (!outcome.writable) return 'read_only';
  return outcome.changed === 1 ? 'unlinked' : 'not_linked';
}
