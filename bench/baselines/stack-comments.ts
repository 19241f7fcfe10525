// The stack baseline's GET /tasks/{id}/comments and GET /tasks/{id}/activity: after the session
// check, the service's two statements, word for word as its query builder writes them, one round
// trip each (server/comments/service.ts listComments, server/activity/service.ts listActivity): the
// task under the visibility rule (server/tasks/service.ts findVisibleTaskRef, the rule of
// server/tasks/queries.ts), then the page of `limit + 1` rows along the index, and the same JSON,
// with cursors signed as the service signs its own (under a key of this process).
import { z } from 'zod';
import { ActivityQuerySchema } from '../../contract/activity.js';
import { CommentListQuerySchema } from '../../contract/comments.js';
import type { Caller } from './stack-caller.js';
import type { StackDb } from './stack-db.js';
import { problem, type Answer } from './stack-http.js';
import { cursorCodec, pageAnswer } from './stack-list.js';
import { isAdmin } from './stack-tasks.js';

/** The task's reference if the caller may see it: an admin every task; others a personal task they own or are assigned, or one of their projects'. */
const VISIBLE_TASK = `select "tasks"."id", "tasks"."owner_id" as "ownerId", "tasks"."version" from "tasks" where "tasks"."id" = $1`;
const VISIBLE_TASK_FOR_ADMIN = `${VISIBLE_TASK} and true`;
const VISIBLE_TASK_FOR_USER = `${VISIBLE_TASK} and (("tasks"."project_id" is null and ("tasks"."owner_id" = $2 or "tasks"."assignee_id" = $3)) or ((SELECT pm.role FROM project_members pm WHERE pm.project_id = tasks.project_id AND pm.user_id = $4::uuid) IS NOT NULL))`;

/** Whether the caller sees the task (its reference read as the service reads it). */
async function taskVisible(db: StackDb, caller: Caller, taskId: string): Promise<boolean> {
  const { rows } = isAdmin(caller)
    ? await db.query(VISIBLE_TASK_FOR_ADMIN, [taskId])
    : await db.query(VISIBLE_TASK_FOR_USER, [taskId, caller.userId, caller.userId, caller.userId]);
  return rows.length > 0;
}

const COMMENT_COLUMNS = `"comments"."id", "comments"."task_id" as "taskId", "comments"."author_id" as "authorId", "comments"."body", "comments"."created_at" as "createdAt", "comments"."updated_at" as "updatedAt", "comments"."edited_at" as "editedAt"`;
/** Oldest first along comments (task_id, id): $1 the task, then the last id seen (after a cursor), then limit + 1. */
const COMMENTS_FIRST = `select ${COMMENT_COLUMNS} from "comments" where "comments"."task_id" = $1 order by "comments"."id" limit $2`;
const COMMENTS_AFTER = `select ${COMMENT_COLUMNS} from "comments" where "comments"."task_id" = $1 and "comments"."id" > $2 order by "comments"."id" limit $3`;

const ACTIVITY_COLUMNS = `"task_activity"."id", "task_activity"."at", "task_activity"."actor_id" as "actorId", "task_activity"."type", task_activity.changes as "changes"`;
/** Newest first along task_activity (task_id, at, id) backwards: $1 the task, then the last (at, id) seen, then limit + 1. */
const ACTIVITY_FIRST = `select ${ACTIVITY_COLUMNS} from "task_activity" where "task_activity"."task_id" = $1 order by "task_activity"."at" desc, "task_activity"."id" desc limit $2`;
const ACTIVITY_AFTER = `select ${ACTIVITY_COLUMNS} from "task_activity" where "task_activity"."task_id" = $1 and (task_activity.at, task_activity.id) < ($2::timestamptz, $3::uuid) order by "task_activity"."at" desc, "task_activity"."id" desc limit $4`;

interface CommentRow {
  id: string;
  taskId: string;
  authorId: string | null;
  body: string;
  createdAt: Date;
  updatedAt: Date;
  editedAt: Date | null;
}

interface ActivityRow {
  id: string;
  at: Date;
  actorId: string | null;
  type: string;
  changes: unknown;
}

/** The lists' orders, as their cursors name them (server/comments/service.ts, server/activity/service.ts). */
const CREATION_ORDER = 'id';
const ACTIVITY_ORDER = '-at';

/** GET /tasks/{id}/comments and GET /tasks/{id}/activity for a caller. */
export function taskHistory(db: StackDb) {
  const cursors = cursorCodec();
  const query = (url: URL) => Object.fromEntries(url.searchParams);

  const comments = async (caller: Caller, taskId: string, url: URL): Promise<Answer> => {
    const parsed = CommentListQuerySchema.safeParse(query(url));
    if (!parsed.success) return problem(400, 'Bad Request');
    const { limit, cursor: raw } = parsed.data;
    if (!(await taskVisible(db, caller, taskId))) return problem(404, 'Not Found');
    const cursor = cursors.decode(raw, CREATION_ORDER);
    if (cursor === null) return problem(400, 'Invalid cursor');
    const { rows } = cursor
      ? await db.query<CommentRow>(COMMENTS_AFTER, [taskId, cursor.id, limit + 1])
      : await db.query<CommentRow>(COMMENTS_FIRST, [taskId, limit + 1]);
    return pageAnswer(
      url,
      rows,
      limit,
      (row) => cursors.encode({ s: CREATION_ORDER, v: null, id: row.id }),
      (row) => ({
        id: row.id,
        taskId: row.taskId,
        authorId: row.authorId,
        body: row.body,
        createdAt: row.createdAt.toISOString(),
        updatedAt: row.updatedAt.toISOString(),
        editedAt: row.editedAt?.toISOString() ?? null,
      }),
    );
  };

  const activity = async (caller: Caller, taskId: string, url: URL): Promise<Answer> => {
    const parsed = ActivityQuerySchema.safeParse(query(url));
    if (!parsed.success) return problem(400, 'Bad Request');
    const { limit, cursor: raw } = parsed.data;
    const cursor = cursors.decode(raw, ACTIVITY_ORDER);
    const at = z.string().safeParse(cursor?.v);
    if (cursor === null || (cursor && !at.success)) return problem(400, 'Invalid cursor');
    if (!(await taskVisible(db, caller, taskId))) return problem(404, 'Not Found');
    const { rows } =
      cursor && at.success
        ? await db.query<ActivityRow>(ACTIVITY_AFTER, [taskId, at.data, cursor.id, limit + 1])
        : await db.query<ActivityRow>(ACTIVITY_FIRST, [taskId, limit + 1]);
    return pageAnswer(
      url,
      rows,
      limit,
      (row) => cursors.encode({ s: ACTIVITY_ORDER, v: row.at.toISOString(), id: row.id }),
      (row) => ({ id: row.id, at: row.at.toISOString(), actorId: row.actorId, type: row.type, changes: row.changes }),
    );
  };

  return { comments, activity };
}
