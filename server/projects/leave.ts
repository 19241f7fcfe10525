// What a user's deletion does to their projects, run in the transaction that deletes the user
// (server/users/service.ts) before the user's row goes.
import { sql } from 'kysely';
import { rawQuery, tables } from '../db/query.js';
import type { SqlSession } from '../db/sql.js';
import { EVENT_WRITES, PLACE_NEW_EVENTS, UUIDV7_SQL } from '../events/outbox.js';
import { goneDeltas, ripple, rippleEvents } from '../tasks/hierarchy.js';
import { audience, settleTaskStubs, taskEventStub } from '../tasks/change-events.js';
import { tagJson } from '../tags/store.js';
import { memberJson } from './serialize.js';
import { NO_AUDIENCE } from './store.js';

/** The projects user `userId` is the only member of: those their leaving deletes. */
const soleMemberProjects = (userId: string) =>
  tables
    .selectFrom('project_members as m')
    .select('m.project_id')
    .where('m.user_id', '=', userId)
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('project_members as o')
            .select('o.user_id')
            .whereRef('o.project_id', '=', 'm.project_id')
            .where('o.user_id', '<>', userId),
        ),
      ),
    );

/**
 * Takes user `userId` out of every project they belong to: a project where they were the last
 * admin passes to its longest-standing remaining member, made admin (`project.member_updated`); a
 * project left without members is deleted with its tasks and tags (`project.deleted`); from the
 * others they are removed (`project.member_removed`, to the remaining members and to them). The
 * tasks elsewhere that the deleted projects' tasks blocked are unblocked, each with its `task.updated`. The
 * projects are locked first, in id order, as every change of a project locks it (store.ts).
 * Answers the storage keys of the deleted projects' attachments, to discard after commit.
 */
export async function leaveProjectsOf(db: SqlSession, userId: string, actorId: string | null): Promise<string[]> {
  await db.all(
    tables
      .selectFrom('projects')
      .select('projects.id')
      .where(
        'projects.id',
        'in',
        tables.selectFrom('project_members').select('project_members.project_id').where('user_id', '=', userId),
      )
      .orderBy('projects.id')
      .forUpdate(),
  );
  // The tasks of the projects that go (those the user is the only member of, which no change can
  // join now that they are locked), before the statement below takes its snapshot: a relation made
  // on one meanwhile would go uncounted by the ripple, and an upload's bytes unread by doomed_keys.
  await db.all(
    tables
      .selectFrom('tasks')
      .select('tasks.id')
      .where('tasks.project_id', 'in', soleMemberProjects(userId))
      .orderBy('tasks.id')
      .forUpdate(),
  );
  await db.exec('SAVEPOINT leave_projects');
  const [left] = await db.all(
    rawQuery(sql<{ storage_keys: string[] }>`
      WITH args AS (SELECT ${actorId}::uuid AS me, ${new Date()}::timestamptz AS now),
      mine AS (SELECT m.project_id, m.role FROM project_members m WHERE m.user_id = ${userId}::uuid),
      others AS (
        SELECT o.* FROM project_members o JOIN mine ON o.project_id = mine.project_id WHERE o.user_id <> ${userId}::uuid
      ),
      doomed AS (
        SELECT mine.project_id FROM mine WHERE NOT EXISTS (SELECT 1 FROM others o WHERE o.project_id = mine.project_id)
      ),
      heirs AS (
        SELECT DISTINCT ON (o.project_id) o.project_id, o.user_id
        FROM others o JOIN mine ON mine.project_id = o.project_id AND mine.role = 'admin'
        WHERE NOT EXISTS (SELECT 1 FROM others a WHERE a.project_id = o.project_id AND a.role = 'admin')
        ORDER BY o.project_id, o.added_at, o.user_id
      ),
      promoted AS (
        UPDATE project_members m SET role = 'admin' FROM heirs h
        WHERE m.project_id = h.project_id AND m.user_id = h.user_id
        RETURNING m.*
      ),
      doomed_keys AS (
        SELECT a.storage_key FROM attachments a JOIN tasks t ON t.id = a.task_id JOIN doomed d ON t.project_id = d.project_id
      ),
      removed AS (
        DELETE FROM project_members m WHERE m.user_id = ${userId}::uuid AND m.project_id NOT IN (SELECT project_id FROM doomed)
        RETURNING m.project_id
      ),
      deleted AS (DELETE FROM projects p USING doomed d WHERE p.id = d.project_id RETURNING p.id),
      -- Their tasks go by the cascade; what stays that they blocked loses them (server/tasks/hierarchy.ts).
      gone AS (SELECT t.id, t.parent_id, t.status FROM tasks t JOIN doomed d ON t.project_id = d.project_id),
      deltas AS (${sql.raw(goneDeltas('gone'))}),
      ${sql.raw(ripple('(SELECT now FROM args)'))},
      changes AS (
        SELECT p.project_id, 1 AS k, 'project.member_updated' AS type,
               jsonb_build_object('projectId', p.project_id, 'member', ${sql.raw(memberJson('p', 'u'))}) AS data,
               ${sql.raw(NO_AUDIENCE)} AS audience
        FROM promoted p JOIN users u ON u.id = p.user_id
        UNION ALL
        SELECT r.project_id, 2, 'project.member_removed', jsonb_build_object('projectId', r.project_id, 'userId', ${userId}::uuid),
               ARRAY[${userId}::uuid]
        FROM removed r
        UNION ALL
        SELECT d.id, 3, 'project.deleted', jsonb_build_object('projectId', d.id), ARRAY[${userId}::uuid]
        FROM deleted d
      ),
      new_events AS (
        SELECT ${sql.raw(UUIDV7_SQL)} AS id, type, data, audience, ${actorId}::uuid AS actor_id,
               row_number() OVER (ORDER BY project_id, k) AS n
        FROM changes
        UNION ALL
        -- The unblocked tasks' task.updated, after the projects' events.
        SELECT id, type, data, audience, actor_id, n + (SELECT count(*) FROM changes)
        FROM (${sql.raw(rippleEvents('(SELECT me FROM args)'))}) AS unblocked
      ),
      ${sql.raw(EVENT_WRITES)}
      SELECT ARRAY(SELECT storage_key FROM doomed_keys) AS storage_keys`),
  );
  await db.rows(settleTaskStubs.text, settleTaskStubs.values);
  await handOverProjectWork(db, userId, actorId);
  await db.exec(PLACE_NEW_EVENTS);
  await db.exec('RELEASE SAVEPOINT leave_projects');
  return left?.storage_keys ?? [];
}

/**
 * The user's tasks and tags in projects outlive them: each passes to its project's longest-standing
 * admin (after the promotions above, so every remaining project has one), the tasks with a new
 * version and a `task.updated` each, the tags with a `tag.updated`. Runs once the user is out of every project, before their row
 * (and, by cascade, whatever they still own) goes.
 */
async function handOverProjectWork(db: SqlSession, userId: string, actorId: string | null): Promise<void> {
  await db.all(
    rawQuery(sql`
      WITH projects_of AS (
        SELECT DISTINCT t.project_id FROM tasks t WHERE t.owner_id = ${userId}::uuid AND t.project_id IS NOT NULL
        UNION
        SELECT DISTINCT g.project_id FROM tags g WHERE g.owner_id = ${userId}::uuid AND g.project_id IS NOT NULL
      ),
      heirs AS (
        SELECT DISTINCT ON (pm.project_id) pm.project_id, pm.user_id
        FROM project_members pm JOIN projects_of p ON p.project_id = pm.project_id
        WHERE pm.role = 'admin' AND pm.user_id <> ${userId}::uuid
        ORDER BY pm.project_id, pm.added_at, pm.user_id
      ),
      handed AS (
        UPDATE tasks t SET owner_id = h.user_id, version = t.version + 1, updated_at = statement_timestamp()
        FROM heirs h WHERE t.owner_id = ${userId}::uuid AND t.project_id = h.project_id
        RETURNING t.id, t.owner_id, t.assignee_id, t.project_id
      ),
      tags_handed AS (
        UPDATE tags g SET owner_id = h.user_id FROM heirs h
        WHERE g.owner_id = ${userId}::uuid AND g.project_id = h.project_id
        RETURNING g.*
      ),
      changes AS (
        SELECT t.id AS row_id, 1 AS k, 'task.updated' AS type, ${sql.raw(taskEventStub('t'))} AS data,
               ${sql.raw(audience('t'))} AS audience
        FROM handed t
        UNION ALL
        -- A project tag's events name nobody: the project's members read them (server/events/outbox.ts).
        SELECT g.id, 2, 'tag.updated', jsonb_build_object('tag', ${tagJson('g')}), ARRAY[]::uuid[]
        FROM tags_handed g
      ),
      new_events AS (
        SELECT ${sql.raw(UUIDV7_SQL)} AS id, type, data, audience, ${actorId}::uuid AS actor_id,
               row_number() OVER (ORDER BY k, row_id) AS n
        FROM changes
      ),
      ${sql.raw(EVENT_WRITES)}
      SELECT count(*) FROM handed`),
  );
  await db.rows(settleTaskStubs.text, settleTaskStubs.values);
}
