// The members' writes, each one pipelined transaction with the project's row locked first
// (store.ts): the checks run in the order the API answers them, authorization before conflicts,
// on the memberships as the previous change of the project left them.
import type { ProjectRole } from '@task-service/client';
import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import type { AppContext } from '../context.js';
import { rawQuery, tables } from '../db/query.js';
import { EVENT_WRITES, UUIDV7_SQL } from '../events/outbox.js';
import { audience, settleTaskStubs, taskEventStub } from '../tasks/change-events.js';
import type { Principal } from '../http/principal.js';
import { memberJson, membersWithUsers, type MemberRow } from './serialize.js';
import { BEGIN_WRITE, lockProject, manages, NO_AUDIENCE, sees, SETTLE_EVENTS } from './store.js';

/** SQL true when project `p` has an admin other than user `userId`. */
const anotherAdmin = (p: string, userId: string) =>
  sql`EXISTS (SELECT 1 FROM project_members o WHERE o.project_id = ${sql.raw(p)}.id AND o.role = 'admin' AND o.user_id <> ${userId}::uuid)`;

const memberOf = (projectId: string, userId: string) =>
  membersWithUsers().where('project_members.project_id', '=', projectId).where('project_members.user_id', '=', userId);

export type MemberAddOutcome =
  { kind: 'not_found' | 'forbidden' | 'no_user' | 'already_member' | 'full' } | { kind: 'added'; row: MemberRow };

/**
 * Adds the user named by id or email with `role`: the checks (visible, project admin, the user
 * exists, not a member yet, room under `maxMembers`), the membership and its
 * `project.member_added` (to the members and the new one), in one round trip.
 */
export async function insertMember(
  ctx: AppContext,
  principal: Principal,
  projectId: string,
  target: { userId?: string | undefined; email?: string | undefined },
  role: ProjectRole,
  maxMembers: number,
  now: Date,
): Promise<MemberAddOutcome> {
  const [byId, byEmail] = [target.userId ?? null, target.email ?? null];
  const members = membersWithUsers().where('project_members.project_id', '=', projectId);
  const { verdict, member } = await ctx.db.sql.pipeline({
    lock: lockProject(projectId),
    begin: BEGIN_WRITE,
    verdict: rawQuery(sql<{
      outcome: 'not_found' | 'forbidden' | 'no_user' | 'already_member' | 'full' | 'apply';
    }>`
      WITH target AS (SELECT u.id FROM users u WHERE u.id = ${byId}::uuid OR u.email = ${byEmail}::text),
      verdict AS (
        SELECT p.id, t.id AS user_id, CASE
            WHEN (${sees(principal, 'p')}) IS NOT TRUE THEN 'not_found'
            WHEN (${manages(principal, 'p')}) IS NOT TRUE THEN 'forbidden'
            WHEN t.id IS NULL THEN 'no_user'
            WHEN EXISTS (SELECT 1 FROM project_members pm WHERE pm.project_id = p.id AND pm.user_id = t.id) THEN 'already_member'
            WHEN (SELECT count(*) FROM project_members pm WHERE pm.project_id = p.id) >= ${maxMembers}::int THEN 'full'
            ELSE 'apply' END AS outcome
        FROM projects p LEFT JOIN target t ON true WHERE p.id = ${projectId}
      ),
      added AS (
        INSERT INTO project_members (project_id, user_id, role, added_at)
        SELECT v.id, v.user_id, ${role}::"ProjectRole", ${now}::timestamptz FROM verdict v WHERE v.outcome = 'apply'
        ON CONFLICT DO NOTHING
        RETURNING *
      ),
      new_events AS (
        SELECT ${uuidv7()}::uuid AS id, 'project.member_added' AS type,
               jsonb_build_object('projectId', a.project_id, 'member', ${sql.raw(memberJson('a', 'u'))}) AS data,
               ${sql.raw(NO_AUDIENCE)} AS audience, ${principal.userId}::uuid AS actor_id, 1 AS n
        FROM added a JOIN users u ON u.id = a.user_id
      ),
      ${sql.raw(EVENT_WRITES)}
      SELECT outcome FROM verdict`),
    settle: SETTLE_EVENTS,
    member: byId !== null ? members.where('users.id', '=', byId) : members.where('users.email', '=', byEmail ?? ''),
  });
  const [outcome, row] = [verdict[0]?.outcome, member[0]];
  if (outcome === undefined) return { kind: 'not_found' };
  if (outcome !== 'apply') return { kind: outcome };
  return row ? { kind: 'added', row } : { kind: 'no_user' };
}

export type MemberChangeOutcome =
  { kind: 'not_found' | 'forbidden' | 'no_member' | 'last_admin' } | { kind: 'changed' | 'unchanged'; row: MemberRow };

/**
 * Gives a member another role: the checks (visible, project admin, a member, not demoting the last
 * admin), the change and its `project.member_updated` (to every member), in one round trip.
 */
export async function updateMember(
  ctx: AppContext,
  principal: Principal,
  projectId: string,
  userId: string,
  role: ProjectRole,
): Promise<MemberChangeOutcome> {
  const { verdict, member } = await ctx.db.sql.pipeline({
    lock: lockProject(projectId),
    begin: BEGIN_WRITE,
    verdict: rawQuery(sql<{ outcome: 'not_found' | 'forbidden' | 'no_member' | 'last_admin' | 'unchanged' | 'apply' }>`
      WITH verdict AS (
        SELECT p.id, m.user_id, CASE
            WHEN (${sees(principal, 'p')}) IS NOT TRUE THEN 'not_found'
            WHEN (${manages(principal, 'p')}) IS NOT TRUE THEN 'forbidden'
            WHEN m.user_id IS NULL THEN 'no_member'
            WHEN m.role = ${role}::"ProjectRole" THEN 'unchanged'
            WHEN m.role = 'admin' AND NOT ${anotherAdmin('p', userId)} THEN 'last_admin'
            ELSE 'apply' END AS outcome
        FROM projects p LEFT JOIN project_members m ON m.project_id = p.id AND m.user_id = ${userId}::uuid
        WHERE p.id = ${projectId}
      ),
      updated AS (
        UPDATE project_members m SET role = ${role}::"ProjectRole"
        FROM verdict v WHERE m.project_id = v.id AND m.user_id = v.user_id AND v.outcome = 'apply'
        RETURNING m.*
      ),
      new_events AS (
        SELECT ${uuidv7()}::uuid AS id, 'project.member_updated' AS type,
               jsonb_build_object('projectId', m.project_id, 'member', ${sql.raw(memberJson('m', 'u'))}) AS data,
               ${sql.raw(NO_AUDIENCE)} AS audience, ${principal.userId}::uuid AS actor_id, 1 AS n
        FROM updated m JOIN users u ON u.id = m.user_id
      ),
      ${sql.raw(EVENT_WRITES)}
      SELECT outcome FROM verdict`),
    settle: SETTLE_EVENTS,
    member: memberOf(projectId, userId),
  });
  const [outcome, row] = [verdict[0]?.outcome, member[0]];
  if (outcome === undefined || outcome === 'not_found') return { kind: 'not_found' };
  if (outcome === 'apply' || outcome === 'unchanged') {
    return row ? { kind: outcome === 'apply' ? 'changed' : 'unchanged', row } : { kind: 'no_member' };
  }
  return { kind: outcome };
}

export type MemberRemoveOutcome = 'not_found' | 'forbidden' | 'no_member' | 'last_admin' | 'removed';

/**
 * Removes a member (a project admin removes anyone, a member themself): the checks, the removal and
 * its `project.member_removed` (to every member, the removed one included: their last event of the
 * project), in one round trip. The project's tasks assigned to them are unassigned (an assignee of a
 * project's task is a member), each with a new version and a `task.updated`: their rows are locked
 * before the membership, as a task's writes lock the task before the memberships they rely on, and
 * the unassigning statement runs after the removal, so it also finds an assignment that committed
 * while the removal waited.
 */
export async function deleteMember(
  ctx: AppContext,
  principal: Principal,
  projectId: string,
  userId: string,
): Promise<MemberRemoveOutcome> {
  const leaving = userId === principal.userId;
  const { verdict } = await ctx.db.sql.pipeline({
    lock: [
      lockProject(projectId),
      tables
        .selectFrom('tasks')
        .select('tasks.id')
        .where('tasks.project_id', '=', projectId)
        .where('tasks.assignee_id', '=', userId)
        .orderBy('tasks.id')
        .forNoKeyUpdate(),
    ],
    begin: BEGIN_WRITE,
    verdict: rawQuery(sql<{ outcome: MemberRemoveOutcome }>`
      WITH verdict AS (
        SELECT p.id, m.user_id, CASE
            WHEN (${sees(principal, 'p')}) IS NOT TRUE THEN 'not_found'
            WHEN NOT ${leaving}::boolean AND (${manages(principal, 'p')}) IS NOT TRUE THEN 'forbidden'
            WHEN m.user_id IS NULL THEN 'no_member'
            WHEN m.role = 'admin' AND NOT ${anotherAdmin('p', userId)} THEN 'last_admin'
            ELSE 'removed' END AS outcome
        FROM projects p LEFT JOIN project_members m ON m.project_id = p.id AND m.user_id = ${userId}::uuid
        WHERE p.id = ${projectId}
      ),
      removed AS (
        DELETE FROM project_members m USING verdict v
        WHERE m.project_id = v.id AND m.user_id = v.user_id AND v.outcome = 'removed'
        RETURNING m.project_id, m.user_id
      ),
      new_events AS (
        SELECT ${uuidv7()}::uuid AS id, 'project.member_removed' AS type,
               jsonb_build_object('projectId', r.project_id, 'userId', r.user_id) AS data,
               ARRAY[r.user_id] AS audience, ${principal.userId}::uuid AS actor_id, 1 AS n
        FROM removed r
      ),
      ${sql.raw(EVENT_WRITES)}
      SELECT outcome FROM verdict`),
    unassign: rawQuery(sql`
      WITH touched AS (
        UPDATE tasks t SET assignee_id = NULL, version = t.version + 1, updated_at = statement_timestamp()
        WHERE t.project_id = ${projectId}::uuid AND t.assignee_id = ${userId}::uuid
          AND NOT EXISTS (SELECT 1 FROM project_members pm WHERE pm.project_id = t.project_id AND pm.user_id = ${userId}::uuid)
        RETURNING t.id, t.owner_id, t.assignee_id, t.project_id
      ),
      new_events AS (
        SELECT ${sql.raw(UUIDV7_SQL)} AS id, 'task.updated' AS type, ${sql.raw(taskEventStub('t'))} AS data,
               ${sql.raw(audience('t'))} AS audience, ${principal.userId}::uuid AS actor_id,
               row_number() OVER (ORDER BY t.id) AS n
        FROM touched t
      ),
      ${sql.raw(EVENT_WRITES)}
      SELECT count(*) FROM touched`),
    settle: [settleTaskStubs, ...SETTLE_EVENTS],
  });
  return verdict[0]?.outcome ?? 'not_found';
}
