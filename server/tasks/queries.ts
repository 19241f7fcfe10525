import type { Expression, ExpressionBuilder, SqlBool } from 'kysely';
import type { DB } from '../db/query.js';
import { isAdmin, type Principal } from '../http/principal.js';

/** Whose tasks: all of them, or those a user owns, is assigned, or either. */
export type TaskSet = { kind: 'all' } | { kind: 'owner' | 'assignee' | 'either'; userId: string };

/** Who sees a task: admins every task, others what they own or are assigned to. */
export const visibleTasks = (principal: Principal): TaskSet =>
  isAdmin(principal) ? { kind: 'all' } : { kind: 'either', userId: principal.userId };

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
      case 'owner':
        return eb('tasks.owner_id', '=', set.userId);
      case 'assignee':
        return eb('tasks.assignee_id', '=', set.userId);
      case 'either':
        return eb.or([inTaskSet({ ...set, kind: 'owner' })(eb), inTaskSet({ ...set, kind: 'assignee' })(eb)]);
    }
  };

/** The rule every read and write of a task applies (visibleTasks), as a condition on the row `tasks`. */
export const taskVisibleTo = (principal: Principal) => inTaskSet(visibleTasks(principal));
