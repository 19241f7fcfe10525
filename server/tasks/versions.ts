import type { Task } from '@task-service/client';
import type { Expression, ExpressionBuilder, SqlBool } from 'kysely';
import { tables, type DB } from '../db/query.js';
import type { SqlSession } from '../db/sql.js';
import { taskBefore } from './serialize.js';

/** Which tasks to touch, as a condition on `tasks`. */
export type TaskCondition = (eb: ExpressionBuilder<DB, 'tasks'>) => Expression<SqlBool>;

/** A task given a new version, and the task as it was before (for its `task.updated`'s `previous`). */
export interface TouchedTask {
  id: string;
  before: Task;
}

/**
 * Gives every matching task a new version and updatedAt, and returns them as they were (each gets a
 * `task.updated` event, recordTaskUpdates). Besides direct edits, a task changes when its tag set, a tag's name or
 * colour, its attachments or its assignee's existence change: all show in its representation, so
 * its ETag must change too.
 */
export async function touchTasks(tx: SqlSession, where: TaskCondition): Promise<TouchedTask[]> {
  return tx.all(
    tables
      .updateTable('tasks')
      .set((eb) => ({ version: eb('version', '+', 1), updated_at: new Date() }))
      .where(where)
      .returning(['id', taskBefore('tasks').as('before')]),
  );
}
