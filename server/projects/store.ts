// The projects' writes, each one pipelined transaction (SqlDatabase.pipeline) as the tags' are
// (server/tags/store.ts): the project's row locked first, then one statement that decides every
// check on the rows as they are once locked and writes the change with its events, which are
// then placed (server/events/outbox.ts), in one round trip.
//
// Every change to a project or its members locks the project's row first (FOR NO KEY UPDATE; FOR
// UPDATE to delete it), so the changes of one project run one after the other, each deciding on
// what the one before committed: two admins demoting each other cannot both pass the last-admin
// check, nor two adds of one user both find them absent.
import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import type { AppContext } from '../context.js';
import { rawQuery, tables } from '../db/query.js';
import type { Statement } from '../db/sql.js';
import { EVENT_WRITES, PLACE_NEW_EVENTS } from '../events/outbox.js';
import { ifMatchVersions } from '../http/etags.js';
import { isAdmin, type Principal } from '../http/principal.js';
import { claimBounds, claimLock, holdsRoom, type QuotaClaim } from '../quotas.js';
import { goneDeltas, ripple, rippleEvents } from '../tasks/hierarchy.js';
import { settleTaskStubs } from '../tasks/change-events.js';
import { projectJson, projectsSeenBy, type ProjectRow } from './serialize.js';

/** Opens the subtransaction whose id places the write's events. */
export const BEGIN_WRITE: Statement = { text: 'SAVEPOINT write' };
/** Places the events the write made (their ids are made in SQL) and ends its subtransaction. */
export const SETTLE_EVENTS: Statement[] = [{ text: PLACE_NEW_EVENTS }, { text: 'RELEASE SAVEPOINT write' }];

/** Holds the project's row against every other change of it (and of its members) until commit. */
export const lockProject = (projectId: string) =>
  tables.selectFrom('projects').select('id').where('id', '=', projectId).forNoKeyUpdate();

/**
 * The audience of a project's event: nobody by name, as its members at the time of reading read the
 * events of their projects (the events' project_id, server/events/outbox.ts); so a removed member
 * reads nothing more of it, however late they read.
 */
export const NO_AUDIENCE = 'ARRAY[]::uuid[]';

/** The members of the project whose id is the SQL `projectId`, as an array: who receives its deletion (admins see all). */
export const membersOf = (projectId: string) =>
  `ARRAY(SELECT pm.user_id FROM project_members pm WHERE pm.project_id = ${projectId})`;

/** The role of user `userId` in project `p`; null when they are not a member. */
export const roleIn = (p: string, userId: string) =>
  sql`(SELECT pm.role FROM project_members pm WHERE pm.project_id = ${sql.raw(p)}.id AND pm.user_id = ${userId}::uuid)`;

export type ProjectCreateOutcome = { kind: 'created'; row: ProjectRow } | { kind: 'no_room' };

/**
 * Inserts a project with the caller as its admin and its `project.created` event, if the caller's
 * holdings leave room for the claim (whose lock on the caller's row comes first).
 */
export async function insertProject(
  ctx: AppContext,
  principal: Principal,
  input: { name: string; description: string },
  claim: QuotaClaim,
  now: Date,
): Promise<ProjectCreateOutcome> {
  const id = uuidv7();
  const me = principal.userId;
  const { created } = await ctx.db.sql.pipeline({
    lock: claimLock(claim, me),
    begin: BEGIN_WRITE,
    insert: rawQuery(sql`
      WITH created AS (
        INSERT INTO projects (id, name, description, created_by, version, created_at, updated_at)
        SELECT ${id}, ${input.name}, ${input.description}, ${me}, 1, ${now}, ${now}
        WHERE ${holdsRoom('projects', me, claimBounds(claim, 1n))}
        RETURNING *
      ),
      admin AS (
        INSERT INTO project_members (project_id, user_id, role, added_at)
        SELECT c.id, ${me}, 'admin'::"ProjectRole", ${now} FROM created c RETURNING project_id
      ),
      new_events AS (
        SELECT ${uuidv7()}::uuid AS id, 'project.created' AS type,
               jsonb_build_object('project', ${sql.raw(projectJson('c', '1'))}) AS data,
               ${sql.raw(NO_AUDIENCE)} AS audience, ${me}::uuid AS actor_id, 1 AS n
        FROM created c
      ),
      ${sql.raw(EVENT_WRITES)}
      SELECT count(*) FROM admin`),
    settle: SETTLE_EVENTS,
    created: projectsSeenBy(me).where('projects.id', '=', id),
  });
  const [row] = created;
  return row ? { kind: 'created', row } : { kind: 'no_room' };
}

export type ProjectChangeOutcome =
  | { kind: 'not_found' }
  | { kind: 'forbidden' }
  | { kind: 'stale'; version: number }
  | { kind: 'changed' | 'unchanged'; row: ProjectRow };

/** Whether the caller may manage project `p` (rename, delete, members): an app admin or a project admin. */
export const manages = (principal: Principal, p: string) =>
  isAdmin(principal) ? sql.raw('true') : sql`${roleIn(p, principal.userId)} = 'admin'`;

/** Whether the caller may see project `p`: an app admin or a member. */
export const sees = (principal: Principal, p: string) =>
  isAdmin(principal) ? sql.raw('true') : sql`${roleIn(p, principal.userId)} IS NOT NULL`;

/**
 * Renames the project or changes its description with its row locked, writing only what was sent:
 * the checks (visible, project admin, If-Match), the update and its `project.updated`, in one round trip.
 */
export async function updateProject(
  ctx: AppContext,
  principal: Principal,
  projectId: string,
  ifMatch: string | undefined,
  change: { name?: string; description?: string },
  now: Date,
): Promise<ProjectChangeOutcome> {
  const [name, description] = [change.name ?? null, change.description ?? null];
  const { verdict, project } = await ctx.db.sql.pipeline({
    lock: lockProject(projectId),
    begin: BEGIN_WRITE,
    verdict: rawQuery(sql<{ outcome: 'not_found' | 'forbidden' | 'stale' | 'unchanged' | 'apply'; version: number }>`
      WITH verdict AS (
        SELECT p.id, p.version, coalesce(${name}, p.name) AS name, coalesce(${description}, p.description) AS description,
          CASE
            WHEN (${sees(principal, 'p')}) IS NOT TRUE THEN 'not_found'
            WHEN (${manages(principal, 'p')}) IS NOT TRUE THEN 'forbidden'
            WHEN ${ifMatchVersions(ifMatch)}::int[] IS NOT NULL AND NOT (p.version = ANY(${ifMatchVersions(ifMatch)}::int[])) THEN 'stale'
            WHEN coalesce(${name}, p.name) = p.name AND coalesce(${description}, p.description) = p.description THEN 'unchanged'
            ELSE 'apply' END AS outcome
        FROM projects p WHERE p.id = ${projectId}
      ),
      updated AS (
        UPDATE projects p SET name = v.name, description = v.description, version = p.version + 1, updated_at = ${now}
        FROM verdict v WHERE p.id = v.id AND v.outcome = 'apply'
        RETURNING p.*
      ),
      new_events AS (
        SELECT ${uuidv7()}::uuid AS id, 'project.updated' AS type,
               jsonb_build_object('project', ${sql.raw(projectJson('u', '(SELECT count(*) FROM project_members pm WHERE pm.project_id = u.id)'))}) AS data,
               ${sql.raw(NO_AUDIENCE)} AS audience, ${principal.userId}::uuid AS actor_id, 1 AS n
        FROM updated u
      ),
      ${sql.raw(EVENT_WRITES)}
      SELECT outcome, version FROM verdict`),
    settle: SETTLE_EVENTS,
    project: projectsSeenBy(principal.userId).where('projects.id', '=', projectId),
  });
  const [outcome, row] = [verdict[0], project[0]];
  if (!outcome || !row || outcome.outcome === 'not_found') return { kind: 'not_found' };
  if (outcome.outcome === 'forbidden') return { kind: 'forbidden' };
  if (outcome.outcome === 'stale') return { kind: 'stale', version: outcome.version };
  return { kind: outcome.outcome === 'apply' ? 'changed' : 'unchanged', row };
}

export type ProjectDeleteOutcome =
  | { kind: 'not_found' }
  | { kind: 'forbidden' }
  | { kind: 'stale'; version: number }
  | { kind: 'deleted'; storageKeys: string[] };

/**
 * Deletes the project with its row and its tasks' rows locked against every other lock: its tasks (their attachments,
 * comments and links), tags and memberships go by foreign key cascades in the same statement, which
 * reads the attachments' storage keys first and writes one `project.deleted` to its members. The
 * tasks elsewhere that its tasks blocked are unblocked in that statement, each with its version and
 * `task.updated` (server/tasks/hierarchy.ts); its tasks' locks keep a relation from being made meanwhile.
 */
export async function removeProject(
  ctx: AppContext,
  principal: Principal,
  projectId: string,
  ifMatch: string | undefined,
): Promise<ProjectDeleteOutcome> {
  const { verdict } = await ctx.db.sql.pipeline({
    lock: [
      tables.selectFrom('projects').select('id').where('id', '=', projectId).forUpdate(),
      // Its tasks too, before the statement below takes its snapshot: an upload holds its task's
      // row until it commits, and an attachment committed while the cascade waited for that row
      // would go with the task unread by `doomed`, its bytes left in the store.
      tables.selectFrom('tasks').select('id').where('project_id', '=', projectId).forUpdate(),
    ],
    begin: BEGIN_WRITE,
    verdict: rawQuery(sql<{
      outcome: 'not_found' | 'forbidden' | 'stale' | 'apply';
      version: number;
      storage_keys: string[];
    }>`
      WITH args AS (SELECT ${principal.userId}::uuid AS me, ${new Date()}::timestamptz AS now),
      verdict AS (
        SELECT p.id, p.version, CASE
            WHEN (${sees(principal, 'p')}) IS NOT TRUE THEN 'not_found'
            WHEN (${manages(principal, 'p')}) IS NOT TRUE THEN 'forbidden'
            WHEN ${ifMatchVersions(ifMatch)}::int[] IS NOT NULL AND NOT (p.version = ANY(${ifMatchVersions(ifMatch)}::int[])) THEN 'stale'
            ELSE 'apply' END AS outcome
        FROM projects p WHERE p.id = ${projectId}
      ),
      doomed AS (
        SELECT a.storage_key FROM attachments a JOIN tasks t ON t.id = a.task_id
        JOIN verdict v ON t.project_id = v.id AND v.outcome = 'apply'
      ),
      deleted AS (
        DELETE FROM projects p USING verdict v WHERE p.id = v.id AND v.outcome = 'apply'
        RETURNING p.id, ${sql.raw(membersOf('p.id'))} AS audience
      ),
      -- Its tasks go by the cascade; the tasks of other projects or personal ones that they blocked
      -- lose them, as when each is deleted alone (server/tasks/hierarchy.ts).
      gone AS (
        SELECT t.id, t.parent_id, t.status FROM tasks t JOIN verdict v ON t.project_id = v.id AND v.outcome = 'apply'
      ),
      deltas AS (${sql.raw(goneDeltas('gone'))}),
      ${sql.raw(ripple('(SELECT now FROM args)'))},
      new_events AS (
        SELECT ${uuidv7()}::uuid AS id, 'project.deleted' AS type, jsonb_build_object('projectId', d.id) AS data,
               d.audience, args.me AS actor_id, 1 AS n
        FROM deleted d, args
        UNION ALL
        ${sql.raw(rippleEvents('(SELECT me FROM args)'))}
      ),
      ${sql.raw(EVENT_WRITES)}
      SELECT outcome, version, ARRAY(SELECT storage_key FROM doomed) AS storage_keys FROM verdict`),
    settle: [settleTaskStubs, ...SETTLE_EVENTS],
  });
  const [outcome] = verdict;
  if (!outcome || outcome.outcome === 'not_found') return { kind: 'not_found' };
  if (outcome.outcome === 'forbidden') return { kind: 'forbidden' };
  if (outcome.outcome === 'stale') return { kind: 'stale', version: outcome.version };
  return { kind: 'deleted', storageKeys: outcome.storage_keys };
}
