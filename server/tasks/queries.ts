import type { ExpressionBuilder } from 'kysely';
import type { DB } from '../db/query.js';
import { isAdmin, type Principal } from '../http/principal.js';

/** Who sees a task: admins every task, others what they own or are assigned to. */
export const taskVisibleTo = (principal: Principal) => (eb: ExpressionBuilder<DB, 'tasks'>) =>
  isAdmin(principal)
    ? eb.lit(true)
    : eb.or([eb('tasks.owner_id', '=', principal.userId), eb('tasks.assignee_id', '=', principal.userId)]);
