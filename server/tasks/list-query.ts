import { z } from 'zod';
import { TimestampInputSchema } from '@task-service/client';
import { TaskPrioritySchema, type TaskListQuery, type TaskSort } from '@task-service/client';
import { containsPattern } from '../db/search.js';
import { Prisma } from '../generated/prisma/client.js';
import { invalidCursor, type Cursor } from '../http/pagination.js';

/**
 * The SQL of GET /tasks: keyset pagination whose every page is an index range scan that reads about
 * `limit` rows. Prisma cannot say what that takes: a row comparison `(key, id) < (X, Y)` (an OR of
 * two comparisons does not bound the scan), and, for "owner or assignee", two index scans merged
 * (an OR of the two columns defeats both indexes).
 */

/** Whose tasks: all of them (admins), or those a user owns, is assigned, or either. */
export type TaskSet = { kind: 'all' } | { kind: 'owner' | 'assignee' | 'either'; userId: string };

type SortField = 'createdAt' | 'updatedAt' | 'dueAt' | 'priority' | 'title';

interface SortKey {
  /** The indexed expression the list is ordered by (see the task indexes in the migrations). */
  expression: Prisma.Sql;
  /** A cursor's value as a parameter of the expression's type; anything else is a forged cursor. */
  parameter(value: unknown): Prisma.Sql;
}

const CursorTimestamp = TimestampInputSchema;

function parsed<T extends z.ZodTypeAny>(schema: T, value: unknown): z.infer<T> {
  const result = schema.safeParse(value);
  if (!result.success) throw invalidCursor();
  return result.data;
}

const timestampKey = (column: Prisma.Sql): SortKey => ({
  expression: column,
  parameter: (value) => Prisma.sql`${parsed(CursorTimestamp, value)}::timestamptz`,
});

// Tasks without a due date sort after those with one ascending and before them descending: as if
// due at infinity, which an expression index can order (NULLs cannot take part in a row comparison).
const NO_DUE_DATE = 'infinity';

const SORT_KEYS: Record<SortField, SortKey> = {
  createdAt: timestampKey(Prisma.sql`t.created_at`),
  updatedAt: timestampKey(Prisma.sql`t.updated_at`),
  dueAt: {
    expression: Prisma.sql`COALESCE(t.due_at, 'infinity'::timestamptz)`,
    parameter: (value) => Prisma.sql`${parsed(CursorTimestamp.nullable(), value) ?? NO_DUE_DATE}::timestamptz`,
  },
  priority: {
    expression: Prisma.sql`t.priority`,
    parameter: (value) => Prisma.sql`${parsed(TaskPrioritySchema, value)}::"TaskPriority"`,
  },
  title: {
    expression: Prisma.sql`t.title`,
    parameter: (value) => Prisma.sql`${parsed(z.string(), value)}`,
  },
};

export function sortOf(sort: TaskSort): { field: SortField; descending: boolean } {
  const descending = sort.startsWith('-');
  return {
    field: z.enum(['createdAt', 'updatedAt', 'dueAt', 'priority', 'title']).parse(descending ? sort.slice(1) : sort),
    descending,
  };
}

/** The sort value of a task, as its cursor keeps it. */
export function taskCursor(sort: TaskSort, row: Record<SortField, Date | string | null> & { id: string }): Cursor {
  const value = row[sortOf(sort).field];
  return { s: sort, v: value instanceof Date ? value.toISOString() : value, id: row.id };
}

const list = (values: readonly string[], type: string) =>
  Prisma.join(values.map((value) => Prisma.sql`${value}::${Prisma.raw(`"${type}"`)}`));

/** The filters of GET /tasks as SQL conditions. dueAfter is inclusive, dueBefore exclusive. */
function filterConditions(query: TaskListQuery): Prisma.Sql[] {
  const conditions: Prisma.Sql[] = [];
  if (query.status) conditions.push(Prisma.sql`t.status IN (${list(query.status, 'TaskStatus')})`);
  if (query.priority) conditions.push(Prisma.sql`t.priority IN (${list(query.priority, 'TaskPriority')})`);
  for (const tagId of query.tagId ?? []) {
    conditions.push(
      Prisma.sql`EXISTS (SELECT 1 FROM task_tags tt WHERE tt.task_id = t.id AND tt.tag_id = ${tagId}::uuid)`,
    );
  }
  if (query.assigneeId) conditions.push(Prisma.sql`t.assignee_id = ${query.assigneeId}::uuid`);
  if (query.ownerId) conditions.push(Prisma.sql`t.owner_id = ${query.ownerId}::uuid`);
  if (query.dueAfter) conditions.push(Prisma.sql`t.due_at >= ${query.dueAfter}::timestamptz`);
  if (query.dueBefore) conditions.push(Prisma.sql`t.due_at < ${query.dueBefore}::timestamptz`);
  if (query.updatedSince) conditions.push(Prisma.sql`t.updated_at >= ${query.updatedSince}::timestamptz`);
  if (query.q) {
    const pattern = containsPattern(query.q);
    conditions.push(Prisma.sql`(t.title ILIKE ${pattern} OR t.description ILIKE ${pattern})`);
  }
  return conditions;
}

interface Branch {
  conditions: Prisma.Sql[];
  /**
   * The column the branch fixes to one user. The keyset condition names it too, as in
   * `(owner_id, key, id) > (u, X, Y)`: only that user's index can bound such a scan, so the
   * planner never walks the global index filtering other users' tasks out.
   */
  party?: { column: Prisma.Sql; userId: string };
}

/** One index scan per branch: "either" is the tasks a user owns, plus those assigned to them by others. */
function branches(set: TaskSet): Branch[] {
  const owner = (userId: string) => ({ column: Prisma.sql`t.owner_id`, userId });
  const assignee = (userId: string) => ({ column: Prisma.sql`t.assignee_id`, userId });
  switch (set.kind) {
    case 'all':
      return [{ conditions: [] }];
    case 'owner':
      return [{ conditions: [Prisma.sql`t.owner_id = ${set.userId}::uuid`], party: owner(set.userId) }];
    case 'assignee':
      return [{ conditions: [Prisma.sql`t.assignee_id = ${set.userId}::uuid`], party: assignee(set.userId) }];
    case 'either':
      return [
        { conditions: [Prisma.sql`t.owner_id = ${set.userId}::uuid`], party: owner(set.userId) },
        // A user's assigned tasks are few beside the global index: the planner takes theirs unaided.
        {
          conditions: [Prisma.sql`t.assignee_id = ${set.userId}::uuid`, Prisma.sql`t.owner_id <> ${set.userId}::uuid`],
        },
      ];
  }
}

/** The ids of one page of tasks, in order (`limit` rows; the caller asks one more to know of a next page). */
export function taskPageQuery(
  set: TaskSet,
  query: TaskListQuery,
  cursor: Cursor | undefined,
  limit: number,
): Prisma.Sql {
  const { field, descending } = sortOf(query.sort);
  const key = SORT_KEYS[field];
  const direction = Prisma.raw(descending ? 'DESC' : 'ASC');
  const filters = filterConditions(query);
  const selects = branches(set).map(({ conditions, party }) => {
    const after = cursor
      ? [
          Prisma.sql`(${party ? Prisma.sql`${party.column}, ` : Prisma.empty}${key.expression}, t.id) ${Prisma.raw(descending ? '<' : '>')}
            (${party ? Prisma.sql`${party.userId}::uuid, ` : Prisma.empty}${key.parameter(cursor.v)}, ${cursor.id}::uuid)`,
        ]
      : [];
    const where = [...conditions, ...filters, ...after];
    return Prisma.sql`(SELECT t.id, ${key.expression} AS sort_key FROM tasks t
      ${where.length > 0 ? Prisma.sql`WHERE ${Prisma.join(where, ' AND ')}` : Prisma.empty}
      ORDER BY ${key.expression} ${direction}, t.id ${direction} LIMIT ${limit})`;
  });
  const [only] = selects;
  if (selects.length === 1 && only) return only;
  return Prisma.sql`SELECT id FROM (${Prisma.join(selects, ' UNION ALL ')}) AS page
    ORDER BY sort_key ${direction}, id ${direction} LIMIT ${limit}`;
}
