import { expressionBuilder, sql, type Expression, type ExpressionBuilder, type SqlBool } from 'kysely';
import type { DB } from '../db/query.js';
import { isAdmin, type Principal } from '../http/principal.js';

/**
 * Whose tasks: all of them; those a user sees (`member`: their personal tasks and their projects'
 * tasks); or those a user owns, is assigned, or either, among the tasks that user sees.
 */
export type TaskSet =
  { kind: 'all' } | { kind: 'member'; userId: string } | { kind: 'owner' | 'assignee' | 'either'; userId: string };

/** Whose rights a read or write of tasks applies: an admin's (every task), or a user's. */
export type Viewer = Extract<TaskSet, { kind: 'all' | 'member' }>;

/** Who sees a task: admins every task, others their personal tasks and the tasks of their projects. */
export const visibleTasks = (principal: Principal): Viewer =>
  isAdmin(principal) ? { kind: 'all' } : { kind: 'member', userId: principal.userId };

/**
 * The role of `userId` in the project of the row `tasks` (NULL for a personal task or a
 * non-member): one probe of project_members' primary key (project_id, user_id), decided on the
 * membership as it is when the statement runs.
 */
export const projectRoleOf = (userId: string) =>
  sql<
    'viewer' | 'editor' | 'admin' | null
  >`(SELECT pm.role FROM project_members pm WHERE pm.project_id = tasks.project_id AND pm.user_id = ${userId}::uuid)`;

/** Whether `userId` is a member of the project of the row `tasks` (false for a personal task). */
const memberOfProject = (userId: string) => sql<SqlBool>`(${projectRoleOf(userId)} IS NOT NULL)`;

/** A personal task of `userId`'s (owned or assigned) that they see, or a task of their projects. */
const seenBy =
  (userId: string) =>
  (eb: ExpressionBuilder<DB, 'tasks'>): Expression<SqlBool> =>
    eb.or([eb('tasks.project_id', 'is', null), memberOfProject(userId)]);

/**
 * The tasks of `set` as a condition on the row `tasks`. NULL where false (a task without an
 * assignee): in a CASE, test it with IS NOT TRUE.
 */
export const inTaskSet =
  (set: TaskSet) =>
  (eb: ExpressionBuilder<DB, 'tasks'>): Expression<SqlBool> => {
    switch (set.kind) {
      case 'all':
        return eb.lit(true);
      case 'member':
        return eb.or([
          eb.and([
            eb('tasks.project_id', 'is', null),
            eb.or([eb('tasks.owner_id', '=', set.userId), eb('tasks.assignee_id', '=', set.userId)]),
          ]),
          memberOfProject(set.userId),
        ]);
      case 'owner':
        return eb.and([eb('tasks.owner_id', '=', set.userId), seenBy(set.userId)(eb)]);
      case 'assignee':
        return eb.and([eb('tasks.assignee_id', '=', set.userId), seenBy(set.userId)(eb)]);
      case 'either':
        return eb.and([
          eb.or([eb('tasks.owner_id', '=', set.userId), eb('tasks.assignee_id', '=', set.userId)]),
          seenBy(set.userId)(eb),
        ]);
    }
  };

/** The rule every read and write of a task applies (visibleTasks), as a condition on the row `tasks`. */
export const taskVisibleTo = (principal: Principal) => inTaskSet(visibleTasks(principal));

/**
 * Who may change a task they see (its fields, tags, attachments): an admin; the owner or assignee
 * of a personal task; an editor or admin of the task's project. A condition on the row `tasks`, for
 * a viewer (visibleTasks of a principal; a statement prepared once per kind of viewer takes the
 * user as a value).
 */
export const writableBy =
  (viewer: Viewer) =>
  (eb: ExpressionBuilder<DB, 'tasks'>): Expression<SqlBool> =>
    viewer.kind === 'all'
      ? eb.lit(true)
      : eb.or([
          eb.and([
            eb('tasks.project_id', 'is', null),
            eb.or([eb('tasks.owner_id', '=', viewer.userId), eb('tasks.assignee_id', '=', viewer.userId)]),
          ]),
          sql<SqlBool>`(${projectRoleOf(viewer.userId)} IN ('editor', 'admin'))`,
        ]);

/** Who sees a task (inTaskSet of a viewer) as a condition on the row `tasks`, for SQL written with `sql`. NULL where false. */
export const visibleHere = (viewer: Viewer) => inTaskSet(viewer)(expressionBuilder<DB, 'tasks'>());

/** Who may change a task they see (writableBy), likewise. */
export const writableHere = (viewer: Viewer) => writableBy(viewer)(expressionBuilder<DB, 'tasks'>());
