// The stack baseline's GET /tasks: the service's keyset pagination (server/tasks/list-query.ts: one
// index range scan per branch, a user's personal tasks owned or assigned and one scan per project of
// theirs, merged) and the rows of the page
// in one statement, with cursors signed as the service signs its own (under a key of this process).
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { TaskListQuerySchema, type TaskSort } from '../../contract/tasks.js';
import type { Caller } from './stack-caller.js';
import type { StackConfig } from './stack-config.js';
import type { StackDb } from './stack-db.js';
import { json, problem, type Answer } from './stack-http.js';
import { isAdmin, serializeTask, taskColumns, type TaskRow } from './stack-tasks.js';

type SortField = 'createdAt' | 'updatedAt' | 'dueAt' | 'priority' | 'title';

interface SortKey {
  /** The indexed expression the list is ordered by. */
  expression: string;
  /** A cursor's value as that expression's type. */
  parameter: (placeholder: string) => string;
  /** A row's value as its cursor keeps it. */
  value: (row: TaskRow) => string | null;
}

const SORT_KEYS: Record<SortField, SortKey> = {
  createdAt: {
    expression: 't.created_at',
    parameter: (p) => `${p}::timestamptz`,
    value: (row) => row.created_at.toISOString(),
  },
  updatedAt: {
    expression: 't.updated_at',
    parameter: (p) => `${p}::timestamptz`,
    value: (row) => row.updated_at.toISOString(),
  },
  // No due date sorts as infinity, as in the service's expression indexes.
  dueAt: {
    expression: `COALESCE(t.due_at, 'infinity'::timestamptz)`,
    parameter: (p) => `COALESCE(${p}::timestamptz, 'infinity'::timestamptz)`,
    value: (row) => row.due_at?.toISOString() ?? null,
  },
  priority: { expression: 't.priority', parameter: (p) => `${p}::"TaskPriority"`, value: (row) => row.priority },
  title: { expression: 't.title', parameter: (p) => `${p}::text`, value: (row) => row.title },
};

const CursorSchema = z.object({ s: z.string(), v: z.string().nullable(), id: z.string().uuid() });
type Cursor = z.infer<typeof CursorSchema>;

/** `<payload>.<HMAC>`, as the service's cursors (server/http/pagination.ts), for every list of the twin. */
export function cursorCodec() {
  const secret = randomBytes(32);
  const mac = (payload: string) =>
    createHmac('sha256', secret).update(`list\n${payload}`).digest().subarray(0, 16).toString('base64url');
  return {
    encode: (cursor: Cursor) => {
      const payload = Buffer.from(JSON.stringify(cursor)).toString('base64url');
      return `${payload}.${mac(payload)}`;
    },
    /** The cursor if this process signed it for this sort (a list's order); null if not; undefined for none. */
    decode: (raw: string | undefined, sort: string): Cursor | null | undefined => {
      if (raw === undefined) return undefined;
      const [payload = '', signature = '', ...rest] = raw.split('.');
      const given = Buffer.from(signature);
      const expected = Buffer.from(mac(payload));
      if (rest.length > 0 || given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
      let text: unknown;
      try {
        text = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
      } catch {
        return null;
      }
      const cursor = CursorSchema.safeParse(text);
      return cursor.success && cursor.data.s === sort ? cursor.data : null;
    },
  };
}

const sortOf = (sort: TaskSort) => ({
  field: z.enum(['createdAt', 'updatedAt', 'dueAt', 'priority', 'title']).parse(sort.replace(/^-/, '')),
  descending: sort.startsWith('-'),
});

/**
 * The statement of one page: parameters $1 the row count, then the user ($2, unless all tasks),
 * then the cursor's value and id (after a cursor).
 */
function pageStatement(config: StackConfig, sort: TaskSort, everyTask: boolean, afterCursor: boolean): string {
  const { field, descending } = sortOf(sort);
  const key = SORT_KEYS[field];
  const direction = descending ? 'DESC' : 'ASC';
  const [value, id] = everyTask ? ['$2', '$3'] : ['$3', '$4'];
  const after = (party: string, partyValue: string) =>
    afterCursor
      ? [
          `(${party}${key.expression}, t.id) ${descending ? '<' : '>'} (${partyValue}${key.parameter(value)}, ${id}::uuid)`,
        ]
      : [];
  const branch = (conditions: string[]) =>
    `(SELECT t.id, ${key.expression} AS sort_key FROM tasks t ${conditions.length ? `WHERE ${conditions.join(' AND ')}` : ''}
      ORDER BY ${key.expression} ${direction}, t.id ${direction} LIMIT $1)`;
  // A user's list: their personal tasks (owned, or assigned by others), and one scan of each of
  // their projects' tasks (from project_members) merged, as the service's list-query.ts has it.
  const page = everyTask
    ? branch(after('', ''))
    : `SELECT id, sort_key FROM (${branch(['t.project_id IS NULL', 't.owner_id = $2::uuid', ...after('t.owner_id, ', '$2::uuid, ')])}
        UNION ALL ${branch(['t.project_id IS NULL', 't.assignee_id = $2::uuid', 't.owner_id <> $2::uuid', ...after('', '')])}
        UNION ALL (SELECT picked.id, picked.sort_key FROM project_members m CROSS JOIN LATERAL
          ${branch(['t.project_id = m.project_id', ...after('t.project_id, ', 'm.project_id, ')])} AS picked
          WHERE m.user_id = $2::uuid ORDER BY picked.sort_key ${direction}, picked.id ${direction} LIMIT $1)) AS branches
        ORDER BY sort_key ${direction}, id ${direction} LIMIT $1`;
  return `WITH page AS (${page})
    SELECT ${taskColumns(config)} FROM page JOIN tasks t ON t.id = page.id ORDER BY page.sort_key ${direction}, page.id ${direction}`;
}

const FILTERS = [
  'status',
  'priority',
  'tagId',
  'assigneeId',
  'ownerId',
  'dueBefore',
  'dueAfter',
  'updatedSince',
  'q',
] as const;

/** GET /tasks for a caller: every task for an admin, else their personal tasks and their projects'. */
export function taskLists(db: StackDb, config: StackConfig) {
  const cursors = cursorCodec();
  const statements = new Map<string, string>();
  const statement = (sort: TaskSort, everyTask: boolean, afterCursor: boolean) => {
    const name = `${sort} ${everyTask} ${afterCursor}`;
    const known = statements.get(name);
    if (known) return known;
    const made = pageStatement(config, sort, everyTask, afterCursor);
    statements.set(name, made);
    return made;
  };

  return async (caller: Caller, url: URL): Promise<Answer> => {
    const parsed = TaskListQuerySchema.safeParse(Object.fromEntries(url.searchParams));
    if (!parsed.success) return problem(400, 'Bad Request');
    const query = parsed.data;
    if (FILTERS.some((filter) => query[filter] !== undefined))
      return problem(400, 'The stack baseline lists without filters');
    const cursor = cursors.decode(query.cursor, query.sort);
    if (cursor === null) return problem(400, 'Invalid cursor');
    const everyTask = isAdmin(caller);
    const params: unknown[] = [
      query.limit + 1,
      ...(everyTask ? [] : [caller.userId]),
      ...(cursor ? [cursor.v, cursor.id] : []),
    ];
    const { rows } = await db.query<TaskRow>(statement(query.sort, everyTask, cursor !== undefined), params);
    return pageAnswer(
      url,
      rows,
      query.limit,
      (last) => cursors.encode({ s: query.sort, v: SORT_KEYS[sortOf(query.sort).field].value(last), id: last.id }),
      serializeTask,
    );
  };
}

/** The page of `limit + 1` rows as the service answers it: the extra row only says a next page exists (Link too). */
export function pageAnswer<Row>(
  url: URL,
  rows: Row[],
  limit: number,
  cursorOf: (row: Row) => string,
  shown: (row: Row) => unknown,
) {
  const pageRows = rows.slice(0, limit);
  const last = pageRows[pageRows.length - 1];
  const nextCursor = rows.length > limit && last ? cursorOf(last) : null;
  const headers: Record<string, string> = {};
  if (nextCursor) {
    const next = new URL(url);
    next.searchParams.set('cursor', nextCursor);
    headers.link = `<${next.pathname}${next.search}>; rel="next"`;
  }
  return json(200, { items: pageRows.map(shown), nextCursor }, headers);
}
