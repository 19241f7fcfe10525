import { sql, type Compilable, type Expression, type ExpressionBuilder, type RawBuilder, type SqlBool } from 'kysely';
import { z } from 'zod';
import { TimestampInputSchema } from '@task-service/client';
import { TaskPrioritySchema, type Task, type TaskListQuery, type TaskSort } from '@task-service/client';
import { preparedQuery, rawQuery, tables, type DB } from '../db/query.js';
import { containsPattern } from '../db/search.js';
import { invalidCursor, type Cursor } from '../http/pagination.js';
import { inTaskSet, projectRoleOf, type TaskSet } from './queries.js';

/**
 * The SQL of GET /tasks: keyset pagination whose every page is an index range scan that reads about
 * `limit` rows. That takes a row comparison `(key, id) < (X, Y)` (an OR of two comparisons does
 * not bound the scan), and, for "owner or assignee", two index scans merged (an OR of the two
 * columns defeats both indexes).
 */

export type { TaskSet };

type SortField = 'createdAt' | 'updatedAt' | 'dueAt' | 'priority' | 'title';

interface SortKey {
  /** The indexed expression the list is ordered by (see the task indexes in the migrations). */
  expression: RawBuilder<unknown>;
  /** A cursor's value (a parameter) as the expression's type. */
  parameter(value: string): RawBuilder<unknown>;
  /** A cursor's value as the parameter takes it; anything else is a forged cursor. */
  checked(value: unknown): string;
}

const CursorTimestamp = TimestampInputSchema;

function parsed<T extends z.ZodTypeAny>(schema: T, value: unknown): z.infer<T> {
  const result = schema.safeParse(value);
  if (!result.success) throw invalidCursor();
  return result.data;
}

const timestampKey = (column: 'tasks.created_at' | 'tasks.updated_at'): SortKey => ({
  expression: sql.ref(column),
  parameter: (value) => sql`${value}::timestamptz`,
  checked: (value) => parsed(CursorTimestamp, value),
});

// Tasks without a due date sort after those with one ascending and before them descending: as if
// due at infinity, which an expression index can order (NULLs cannot take part in a row comparison).
const NO_DUE_DATE = 'infinity';

const SORT_KEYS: Record<SortField, SortKey> = {
  createdAt: timestampKey('tasks.created_at'),
  updatedAt: timestampKey('tasks.updated_at'),
  dueAt: {
    expression: sql`COALESCE(tasks.due_at, 'infinity'::timestamptz)`,
    parameter: (value) => sql`${value}::timestamptz`,
    checked: (value) => parsed(CursorTimestamp.nullable(), value) ?? NO_DUE_DATE,
  },
  priority: {
    expression: sql.ref('tasks.priority'),
    parameter: (value) => sql`${value}::"TaskPriority"`,
    checked: (value) => parsed(TaskPrioritySchema, value),
  },
  title: {
    expression: sql.ref('tasks.title'),
    parameter: (value) => sql`${value}`,
    checked: (value) => parsed(z.string(), value),
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
export const taskCursor = (sort: TaskSort, task: Task): Cursor => ({
  s: sort,
  v: task[sortOf(sort).field],
  id: task.id,
});

/** A timestamp the query gives, as PostgreSQL reads it (to the microsecond). */
const timestamp = (value: string) => sql<Date>`${value}::timestamptz`;

type Condition = (eb: ExpressionBuilder<DB, 'tasks'>) => Expression<SqlBool>;

/**
 * What decides the form of a page's statement (every value it takes is a parameter: PageValues):
 * whose tasks, the sort, whether after a cursor, and which filters the query sets.
 */
export interface PageShape {
  set: TaskSet['kind'];
  sort: TaskSort;
  cursor: boolean;
  status: boolean;
  priority: boolean;
  /** How many tagId filters (each a condition of its own). */
  tags: number;
  assignee: boolean;
  owner: boolean;
  /** Which tasks by project: any, personal ones (`none`), or one project's. */
  project: 'any' | 'none' | 'one';
  parent: boolean;
  dueAfter: boolean;
  dueBefore: boolean;
  updatedSince: boolean;
  blocked: boolean | undefined;
  q: boolean;
}

/** The values a page's statement takes, by name. */
type PageKey =
  | 'userId'
  | 'status'
  | 'priority'
  | `tag${number}`
  | 'assigneeId'
  | 'ownerId'
  | 'projectId'
  | 'parentId'
  | 'dueAfter'
  | 'dueBefore'
  | 'updatedSince'
  | 'pattern'
  | 'cursorValue'
  | 'cursorId'
  | 'limit';

type PageValues = Partial<Record<PageKey, unknown>>;

/** A value of the statement: a parameter (or, while a statement is prepared, its stand-in). */
type Value = (key: PageKey) => string;

/** The filters of GET /tasks as SQL conditions. dueAfter is inclusive, dueBefore exclusive. */
function filterConditions(shape: PageShape, value: Value): Condition[] {
  const conditions: Condition[] = [];
  // A list of values as one array parameter: one statement for any number of them.
  if (shape.status) conditions.push(() => sql<SqlBool>`tasks.status = ANY(${value('status')}::"TaskStatus"[])`);
  if (shape.priority) conditions.push(() => sql<SqlBool>`tasks.priority = ANY(${value('priority')}::"TaskPriority"[])`);
  for (let i = 0; i < shape.tags; i++) {
    conditions.push((eb) =>
      eb.exists(
        eb
          .selectFrom('task_tags')
          .select(sql.lit(1).as('one'))
          .whereRef('task_tags.task_id', '=', 'tasks.id')
          .where('task_tags.tag_id', '=', value(`tag${i}`)),
      ),
    );
  }
  if (shape.assignee) conditions.push((eb) => eb('tasks.assignee_id', '=', value('assigneeId')));
  if (shape.project === 'none') conditions.push(personal);
  else if (shape.project === 'one') conditions.push((eb) => eb('tasks.project_id', '=', value('projectId')));
  if (shape.owner) conditions.push((eb) => eb('tasks.owner_id', '=', value('ownerId')));
  if (shape.dueAfter) conditions.push((eb) => eb('tasks.due_at', '>=', timestamp(value('dueAfter'))));
  if (shape.dueBefore) conditions.push((eb) => eb('tasks.due_at', '<', timestamp(value('dueBefore'))));
  // Blocked tasks are few: `true` pages them along the partial indexes of the blocked tasks (per
  // branch and sort key, migration 20261128140000_blocked_task_indexes), whose predicate the
  // condition must state as they do, a constant (a parameter proves nothing to a generic plan).
  if (shape.blocked === true) conditions.push(() => sql<SqlBool>`tasks.open_blockers > 0`);
  if (shape.blocked === false) conditions.push(() => sql<SqlBool>`tasks.open_blockers = 0`);
  if (shape.updatedSince) conditions.push((eb) => eb('tasks.updated_at', '>=', timestamp(value('updatedSince'))));
  if (shape.q) {
    const pattern = value('pattern');
    conditions.push((eb) => eb.or([eb('tasks.title', 'ilike', pattern), eb('tasks.description', 'ilike', pattern)]));
  }
  return conditions;
}

interface Branch {
  conditions: Condition[];
  /**
   * The column the branch fixes to one user (or project). The keyset condition names it too, as in
   * `(owner_id, key, id) > (u, X, Y)`: only that user's index can bound such a scan, so the
   * planner never walks the global index filtering other users' tasks out.
   */
  party?: {
    column: 'tasks.owner_id' | 'tasks.assignee_id' | 'tasks.project_id' | 'tasks.parent_id';
    userId: string | RawBuilder<string>;
  };
  /**
   * The branch of a member's projects: one scan of the (project_id, key, id) index per project of
   * theirs (project_members' (user_id, project_id) index gives them), each reading at most a page,
   * merged: the party is `memberships.project_id`.
   */
  perProjectOf?: string;
}

const personal: Condition = (eb) => eb('tasks.project_id', 'is', null);

/**
 * One index scan per branch of `set`: "either" is the tasks a user owns, plus those assigned to them
 * by others. A parent's subtasks are one scan of the parent's index whatever the set: they share its
 * project (or its owner), so the set is a condition on each of those few rows.
 */
function branches(set: TaskSet, project: PageShape['project'], value: Value, parent: boolean): Branch[] {
  if (parent) {
    const parentId = value('parentId');
    return [
      {
        // The set as a filter of the parent's rows only: wrapped, so that the planner does not
        // combine its owner or assignee index with the parent's into a bitmap scan and a sort.
        conditions: [
          (eb) => eb('tasks.parent_id', '=', parentId),
          (eb) => sql<SqlBool>`COALESCE(${inTaskSet(set)(eb)}, false)`,
        ],
        party: { column: 'tasks.parent_id', userId: parentId },
      },
    ];
  }
  switch (set.kind) {
    case 'all':
      return project === 'one'
        ? [{ conditions: [], party: { column: 'tasks.project_id', userId: value('projectId') } }]
        : [{ conditions: [] }];
    case 'member': {
      const { userId } = set;
      if (project !== 'one') {
        const own: Branch[] = [
          {
            conditions: [personal, (eb) => eb('tasks.owner_id', '=', userId)],
            party: { column: 'tasks.owner_id', userId },
          },
          // A user's assigned tasks are few beside the global index: the planner takes theirs unaided.
          {
            conditions: [
              personal,
              (eb) => eb('tasks.assignee_id', '=', userId),
              (eb) => eb('tasks.owner_id', '<>', userId),
            ],
          },
        ];
        return project === 'none' ? own : [...own, { conditions: [], perProjectOf: userId }];
      }
      // One project: its tasks when the caller is a member (one probe), else none.
      return [
        {
          conditions: [() => sql<SqlBool>`(${projectRoleOf(userId)} IS NOT NULL)`],
          party: { column: 'tasks.project_id', userId: value('projectId') },
        },
      ];
    }
    case 'owner':
      return [{ conditions: [inTaskSet(set)], party: { column: 'tasks.owner_id', userId: set.userId } }];
    case 'assignee':
      return [{ conditions: [inTaskSet(set)], party: { column: 'tasks.assignee_id', userId: set.userId } }];
    case 'either': {
      const { userId } = set;
      return [
        ...branches({ kind: 'owner', userId }, project, value, false),
        // A user's assigned tasks are few beside the global index: the planner takes theirs unaided.
        {
          conditions: [inTaskSet({ kind: 'assignee', userId }), (eb) => eb('tasks.owner_id', '<>', userId)],
        },
      ];
    }
  }
}

/** A page's task ids in order; a single branch also gives its sort key. */
export type TaskPageQuery = RawBuilder<{ id: string }>;

/** The shape of a page of `set` for `query` (after `cursor`), and the values its statement takes (`limit` rows). */
function pageOf(
  set: TaskSet,
  query: TaskListQuery,
  cursor: Cursor | undefined,
  limit: number,
): { shape: PageShape; values: PageValues } {
  const { status, priority, assigneeId, ownerId, dueAfter, dueBefore, updatedSince, q, projectId, parentId } = query;
  const tagIds = query.tagId ?? [];
  const shape: PageShape = {
    set: set.kind,
    sort: query.sort,
    cursor: cursor !== undefined,
    status: status !== undefined && status.length > 0,
    priority: priority !== undefined && priority.length > 0,
    tags: tagIds.length,
    assignee: Boolean(assigneeId),
    owner: Boolean(ownerId),
    project: projectId === undefined ? 'any' : projectId === 'none' ? 'none' : 'one',
    parent: parentId !== undefined,
    dueAfter: Boolean(dueAfter),
    dueBefore: Boolean(dueBefore),
    updatedSince: Boolean(updatedSince),
    blocked: query.blocked,
    q: Boolean(q),
  };
  const values: PageValues = {
    ...(set.kind !== 'all' && { userId: set.userId }),
    status,
    priority,
    ...Object.fromEntries(tagIds.map((tagId, i) => [`tag${i}`, tagId])),
    assigneeId,
    ownerId,
    ...(shape.project === 'one' && { projectId }),
    parentId,
    dueAfter,
    dueBefore,
    updatedSince,
    ...(q && { pattern: containsPattern(q) }),
    ...(cursor && { cursorValue: SORT_KEYS[sortOf(query.sort).field].checked(cursor.v), cursorId: cursor.id }),
    limit,
  };
  return { shape, values };
}

/** The key a page's statement is kept under: its shape, every field in a fixed order. */
const pageShapeKey = (shape: PageShape): string => JSON.stringify(shape);

/** The ids of one page of tasks of `shape`, in order, taking its values by `value`. */
function pageIds(shape: PageShape, value: Value): TaskPageQuery {
  const { field, descending } = sortOf(shape.sort);
  const key = SORT_KEYS[field];
  const direction = descending ? 'desc' : 'asc';
  const limit = sql<number>`${value('limit')}`;
  const set: TaskSet = shape.set === 'all' ? { kind: 'all' } : { kind: shape.set, userId: value('userId') };
  const filters = filterConditions(shape, value);
  const selects = branches(set, shape.project, value, shape.parent).map(({ conditions, party, perProjectOf }) => {
    const partyColumn = perProjectOf ? 'tasks.project_id' : party?.column;
    const partyValue = perProjectOf ? sql.ref('memberships.project_id') : party && sql`${party.userId}::uuid`;
    const after: Condition[] = shape.cursor
      ? [
          () =>
            sql<SqlBool>`(${sql.join([...(partyColumn ? [sql.ref(partyColumn)] : []), key.expression, sql.ref('tasks.id')])}) ${sql.raw(descending ? '<' : '>')} (${sql.join(
              [
                ...(partyValue ? [partyValue] : []),
                key.parameter(value('cursorValue')),
                sql`${value('cursorId')}::uuid`,
              ],
            )})`,
        ]
      : [];
    const ofProject: Condition[] = perProjectOf ? [() => sql<SqlBool>`tasks.project_id = memberships.project_id`] : [];
    const select = [...ofProject, ...conditions, ...filters, ...after]
      .reduce((select, condition) => select.where(condition), tables.selectFrom('tasks'))
      .select(['tasks.id', key.expression.as('sort_key')])
      .orderBy(key.expression, direction)
      .orderBy('tasks.id', direction)
      .limit(limit);
    if (!perProjectOf) return sql`${select}`;
    return sql`SELECT picked.id, picked.sort_key
      FROM project_members AS memberships CROSS JOIN LATERAL (${select}) AS picked
      WHERE memberships.user_id = ${perProjectOf}::uuid
      ORDER BY picked.sort_key ${sql.raw(direction)}, picked.id ${sql.raw(direction)} LIMIT ${limit}`;
  });
  const [only] = selects;
  if (selects.length === 1 && only) return sql<{ id: string }>`${only}`;
  return sql<{ id: string }>`SELECT id FROM (${sql.join(
    selects.map((select) => sql`(${select})`),
    sql` UNION ALL `,
  )}) AS page
    ORDER BY sort_key ${sql.raw(direction)}, id ${sql.raw(direction)} LIMIT ${limit}`;
}

/**
 * A statement of one page of tasks made by `build` from the page's ids, in order (`limit` rows; the
 * caller asks one more to know of a next page): built once per shape (PageShape), its values bound to it.
 */
export function pageStatement<O>(build: (ids: TaskPageQuery) => Compilable<O>) {
  const prepared = preparedQuery<PageKey, O, PageShape, PageValues>(
    (value, shape) => build(pageIds(shape, value)),
    pageShapeKey,
  );
  return (set: TaskSet, query: TaskListQuery, cursor: Cursor | undefined, limit: number): Compilable<O> => {
    const { shape, values } = pageOf(set, query, cursor, limit);
    return prepared(values, shape);
  };
}

/** The ids of one page of tasks, in order. */
export const taskPageQuery = pageStatement((ids) => rawQuery(ids));
