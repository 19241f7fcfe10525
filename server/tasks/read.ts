// The hot read paths (GET /tasks/{id} and each page of GET /tasks) in plain SQL: one round trip and
// no ORM query compilation, which profiling showed to be most of a small request's CPU. A row has
// the shape Prisma gives with `taskInclude`, so the one serializeTask serves both.
import type { AppContext } from '../context.js';
import { isAdmin, type Principal } from '../http/principal.js';
import type { TaskRow } from './serialize.js';

// Tags in the order of `tagsByName`; the attachment count as `_count.attachments`.
const TASK_ROW = `
  SELECT t.id, t.owner_id AS "ownerId", t.assignee_id AS "assigneeId", t.title, t.description, t.status, t.priority,
    t.due_at AS "dueAt", t.completed_at AS "completedAt", t.version, t.created_at AS "createdAt", t.updated_at AS "updatedAt",
    COALESCE((SELECT json_agg(json_build_object('tag', json_build_object('id', g.id, 'name', g.name, 'color', g.color))
                              ORDER BY g.name_key, g.name, g.id)
              FROM task_tags tt JOIN tags g ON g.id = tt.tag_id WHERE tt.task_id = t.id), '[]'::json) AS tags,
    json_build_object('attachments', (SELECT count(*) FROM attachments a WHERE a.task_id = t.id)) AS "_count"
  FROM tasks t`;

/** The tasks with these ids that still exist, in no particular order. */
export const readTasks = (ctx: AppContext, ids: string[]): Promise<TaskRow[]> =>
  ids.length === 0 ? Promise.resolve([]) : ctx.db.sql.rows<TaskRow>(`${TASK_ROW} WHERE t.id = ANY($1::uuid[])`, [ids]);

/** The task, if the caller may see it: admins every task, others what they own or are assigned to. */
export async function readVisibleTask(ctx: AppContext, principal: Principal, taskId: string): Promise<TaskRow | undefined> {
  const [row] = isAdmin(principal)
    ? await ctx.db.sql.rows<TaskRow>(`${TASK_ROW} WHERE t.id = $1`, [taskId])
    : await ctx.db.sql.rows<TaskRow>(`${TASK_ROW} WHERE t.id = $1 AND (t.owner_id = $2 OR t.assignee_id = $2)`, [taskId, principal.userId]);
  return row;
}
