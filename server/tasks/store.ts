// The tasks' SQL, reads and writes, in one place. Reads are one statement; each write is
// one pipelined transaction (SqlDatabase.pipeline): one round trip, its locks held only while the
// server runs it, the checks decided in SQL on the rows as they are once locked.
//
// A write that changes an existing task locks its row first, then writes in a subtransaction whose
// id places its events (server/events/outbox.ts): writers of one task are placed in the order they
// commit, as the subtransaction's id is given only once the lock is held.
//
// Who sees a task is the rule of queries.ts: every read and write here applies it (visibleHere and
// writableHere of the caller's viewer; a list, its TaskSet as index scans, list-query.ts). What a
// task shows is taskJson (serialize.ts), for answers and event payloads alike.
import type { Task, TaskCreate, TaskListQuery, TaskPatch } from '@task-service/client';
import { sql, type Expression, type ExpressionBuilder, type RawBuilder, type SqlBool } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import type { AppContext } from '../context.js';
import { preparedQuery, rawQuery, tables, type DB, type Statement } from '../db/query.js';
import type { SqlSession } from '../db/sql.js';
import { EVENT_WRITES } from '../events/outbox.js';
import { ifMatchVersions } from '../http/etags.js';
import type { Cursor } from '../http/pagination.js';
import { isAdmin, type Principal } from '../http/principal.js';
import { claimBounds, claimLock, holdsRoom, type QuotaClaim } from '../quotas.js';
import { pageStatement, type TaskPageQuery } from './list-query.js';
import { audience, settleTaskEvents, taskEventStub } from './change-events.js';
import { ancestors, delta, descendants, hierarchyLock, MAX_TASK_DEPTH, ripple, rippleEvents } from './hierarchy.js';
import { inTaskSet, visibleHere, visibleTasks, writableHere, type TaskSet, type Viewer } from './queries.js';
import { taskJson } from './serialize.js';

export { taskJson };

/** Tasks as the API shows them, each as `task`: the caller says which. */
const shownTasks = () => tables.selectFrom('tasks').select(taskJson().as('task'));

/** The task with this id, whoever may see it. */
const shownTask = (taskId: string) => shownTasks().where('tasks.id', '=', taskId);

/** The task with this id as the API shows it, whoever may see it: built once. */
const shownTaskById = preparedQuery((value: (key: 'taskId') => string) => shownTask(value('taskId')));

/**
 * A page of tasks in one statement: `page` (list-query.ts) picks the ids in their order, and their
 * tasks are read in the same statement, in that order (test/list-plans.test.ts explains it).
 */
const taskPage = (page: TaskPageQuery) =>
  rawQuery(sql<{ task: Task }>`WITH page AS (SELECT id, row_number() OVER () AS position FROM (${page}) AS picked)
    SELECT ${taskJson()} AS task FROM tasks JOIN page ON page.id = tasks.id ORDER BY page.position`);

/**
 * The statement of a page of tasks of `set` for `query` after `cursor`, `limit` tasks at most in
 * the list's order: built once per shape of page (a list's build and compile cost more than its
 * database work).
 */
export const taskPageStatement = pageStatement(taskPage);

export async function readTaskPage(
  ctx: AppContext,
  set: TaskSet,
  query: TaskListQuery,
  cursor: Cursor | undefined,
  limit: number,
): Promise<Task[]> {
  return (await ctx.db.sql.all(taskPageStatement(set, query, cursor, limit))).map((row) => row.task);
}

/**
 * The task with this id among the tasks of a set of its kind (`userId`'s, unless all): built once
 * per kind. The benchmark's bare twin of GET /tasks/{id} sends this very statement.
 */
export const visibleTask = preparedQuery((value: (key: 'taskId' | 'userId') => string, kind: TaskSet['kind']) =>
  shownTask(value('taskId')).where(inTaskSet(kind === 'all' ? { kind } : { kind, userId: value('userId') })),
);

/** The task, if the caller may see it. */
export async function readVisibleTask(
  ctx: AppContext,
  principal: Principal,
  taskId: string,
): Promise<Task | undefined> {
  const set = visibleTasks(principal);
  const row = await ctx.db.sql.first(visibleTask({ taskId, userId: principal.userId }, set.kind));
  return row?.task;
}

/** The tasks with these ids, in id order, as the API shows them (for events written outside this file). */
export async function readTasksById(session: SqlSession, ids: readonly string[]): Promise<Task[]> {
  if (ids.length === 0) return [];
  const rows = await session.all(
    // One statement text for any number of ids.
    shownTasks()
      .where('tasks.id', '=', sql<string>`ANY(${ids}::uuid[])`)
      .orderBy('tasks.id'),
  );
  return rows.map((row) => row.task);
}

const SAVEPOINT: Statement = { text: 'SAVEPOINT write' };

/** Locks the task's row, `exclusively` against every other lock (a delete) or only against other writers. */
const lockTask = (taskId: string, exclusively: boolean) => {
  const select = tables.selectFrom('tasks').select(sql.lit(1).as('locked')).where('tasks.id', '=', taskId);
  return exclusively ? select.forUpdate() : select.forNoKeyUpdate();
};

/** An event of one task, in the CTE `new_events` that EVENT_WRITES writes (n = 1), and `also`'s after it. */
const oneEvent = (event: {
  id: string;
  type: 'task.created' | 'task.updated' | 'task.deleted';
  data: RawBuilder<unknown>;
  /** The task row's name; its audience (`former`, `formerProject`: see audience). */
  row: string;
  former?: string;
  formerProject?: string;
  actorId: RawBuilder<string> | string;
  from: RawBuilder<unknown>;
  /** More rows of new_events (SQL), such as the ripple's (hierarchy.ts), after this one. */
  also?: string;
}) => sql`new_events AS (
      SELECT ${event.id}::uuid AS id, ${sql.lit(event.type)} AS type, ${event.data} AS data,
             ${sql.raw(audience(event.row, event.former, event.formerProject))} AS audience, ${event.actorId}::uuid AS actor_id, 1 AS n
      FROM ${event.from}
      ${sql.raw(event.also ? `UNION ALL ${event.also}` : '')}
    ),
    ${sql.raw(EVENT_WRITES)}`;

export type CreateOutcome =
  | { kind: 'created'; task: Task }
  | { kind: 'unknown_project' }
  | { kind: 'assignee_not_member' }
  | { kind: 'unknown_tag' }
  | { kind: 'unknown_parent' | 'too_deep' }
  | { kind: 'no_room' };

/**
 * Whether the caller (`me`, SQL) may write tasks into the project whose id is the SQL `projectId`:
 * an editor or admin of it, or an app admin (the project must exist).
 */
const writesInto = (admin: boolean, projectId: string, me: string) =>
  admin
    ? `EXISTS (SELECT 1 FROM projects p WHERE p.id = ${projectId})`
    : `EXISTS (SELECT 1 FROM project_members pm WHERE pm.project_id = ${projectId} AND pm.user_id = ${me} AND pm.role IN ('editor', 'admin'))`;

/** Whether user `userId` (SQL) is a member of the project `projectId` (SQL): one probe of the primary key. */
const isMemberOf = (projectId: string, userId: string) =>
  `EXISTS (SELECT 1 FROM project_members pm WHERE pm.project_id = ${projectId} AND pm.user_id = ${userId})`;

/**
 * Whether the tag row `tag` may go on a task of owner `ownerId` in project `projectId` (SQL; NULL:
 * a personal task): a project's own tags on its tasks, an owner's personal tags on their personal tasks.
 */
export const tagFits = (tag: string, ownerId: string, projectId: string) =>
  `(CASE WHEN ${projectId} IS NULL THEN ${tag}.project_id IS NULL AND ${tag}.owner_id = ${ownerId} ELSE ${tag}.project_id IS NOT DISTINCT FROM ${projectId} END)`;

/**
 * The memberships a write into a project relies on (the caller's, the assignee's: `users`, a uuid[]
 * value), held shared until commit: a removal or a change of role waits for the write, or the write
 * for it (and then finds it).
 */
const heldMemberships = (
  users: unknown,
  inProjects: (eb: ExpressionBuilder<DB, 'project_members'>) => Expression<SqlBool>,
) =>
  tables
    .selectFrom('project_members')
    .select(sql.lit(1).as('held'))
    .where('project_members.user_id', '=', sql<string>`ANY(${users}::uuid[])`)
    .where(inProjects)
    .orderBy('project_members.project_id')
    .orderBy('project_members.user_id')
    .forShare();

/**
 * Whether the task row `p` may be the parent of a task in project `projectId` owned by `ownerId`
 * (SQL): in the same project, or both personal tasks of the same owner.
 */
const sameHierarchy = (p: string, projectId: string, ownerId: string) =>
  `(CASE WHEN ${projectId} IS NULL THEN ${p}.project_id IS NULL AND ${p}.owner_id = ${ownerId}
     ELSE ${p}.project_id IS NOT DISTINCT FROM ${projectId} END)`;

/** The first lock of a write that puts a task under a parent: the hierarchy `key` (hierarchy.ts). */
const attachHierarchyLock = (key: RawBuilder<string | null>) => rawQuery(sql`SELECT ${hierarchyLock(key)} AS locked`);

/** The second: the parent's row, whose counts the write changes. */
const parentRowLock = (parentId: string) =>
  tables.selectFrom('tasks').select(sql.lit(1).as('locked')).where('tasks.id', '=', parentId).forNoKeyUpdate();

/** The values a creation's statements take (the rest decides their form: a CreateShape). */
type CreateValue =
  | 'id'
  | 'eventId'
  | 'me'
  | 'now'
  | 'tagIds'
  | 'room'
  | 'limit'
  | 'projectId'
  | 'assigneeId'
  | 'parentId'
  | 'title'
  | 'description'
  | 'status'
  | 'priority'
  | 'dueAt'
  | 'completedAt'
  | 'members';

interface CreateValues extends Record<CreateValue, unknown> {
  id: string;
  eventId: string;
  me: string;
  now: Date;
  tagIds: string[];
  room: string;
  limit: number | null;
  projectId: string | null;
  assigneeId: string | null;
  parentId: string | null;
  title: string;
  description: string;
  status: TaskCreate['status'];
  priority: TaskCreate['priority'];
  dueAt: string | null;
  completedAt: Date | null;
  /** The users whose memberships the creation relies on. */
  members: string[];
}

/** Who makes a write, which decides the form of its statement (an admin's checks read no membership). */
type Writer = 'admin' | 'member';

/** The memberships a creation in a project relies on (heldMemberships). */
const createMemberships = preparedQuery<CreateValue, { held: number }, '', CreateValues>((value) =>
  heldMemberships(value('members'), (eb) => eb('project_members.project_id', '=', value('projectId'))),
);

/**
 * The tags shared, as a link shares them: a rename or delete of one waits for this create, or
 * this create for it, so the task never carries (or its event names) a tag as it no longer is.
 */
const createTagLocks = preparedQuery<CreateValue, { locked: number }, '', CreateValues>((value) =>
  tables
    .selectFrom('tags')
    .select(sql.lit(1).as('locked'))
    .where('tags.id', '=', sql<string>`ANY(${value('tagIds')}::uuid[])`)
    .orderBy('tags.id')
    .forShare(),
);

/**
 * Under a parent: its hierarchy (the depth is decided with no other attachment under way in it),
 * then the parent's row, whose counts this create changes.
 */
const createAttachLocks = [
  preparedQuery<CreateValue, { locked: unknown }, '', CreateValues>((value) =>
    attachHierarchyLock(sql`COALESCE(${value('projectId')}::uuid, ${value('me')}::uuid)`),
  ),
  preparedQuery<CreateValue, { locked: number }, '', CreateValues>((value) => parentRowLock(value('parentId'))),
];

/** The creation's checks and the insert, with its tag links (see insertTask). */
const createStatement = preparedQuery<CreateValue, CreateChecks, Writer, CreateValues>((value, writer) => {
  const admin = writer === 'admin';
  const viewer: Viewer = admin ? { kind: 'all' } : { kind: 'member', userId: value('me') };
  return rawQuery(sql<CreateChecks>`
      WITH RECURSIVE args AS (
        SELECT ${value('me')}::uuid AS owner_id, ${value('tagIds')}::uuid[] AS tag_ids, ${value('now')}::timestamptz AS now,
               ${value('room')}::bigint AS room, ${value('limit')}::bigint AS quota_limit, ${value('projectId')}::uuid AS project_id,
               ${value('assigneeId')}::uuid AS assignee_id, ${value('parentId')}::uuid AS parent_id
      ),
      project_ok AS (
        SELECT 1 FROM args
        WHERE args.project_id IS NULL OR ${sql.raw(writesInto(admin, 'args.project_id', 'args.owner_id'))}
      ),
      assignee_ok AS (
        SELECT 1 FROM args
        WHERE args.project_id IS NULL OR args.assignee_id IS NULL OR ${sql.raw(isMemberOf('args.project_id', 'args.assignee_id'))}
      ),
      parent AS (
        SELECT tasks.project_id, tasks.owner_id, (${visibleHere(viewer)}) IS TRUE AS visible
        FROM tasks, args WHERE tasks.id = args.parent_id
      ),
      parent_ok AS (
        SELECT 1 FROM args
        WHERE args.parent_id IS NULL OR EXISTS (SELECT 1 FROM parent p WHERE p.visible AND ${sql.raw(sameHierarchy('p', 'args.project_id', 'args.owner_id'))})
      ),
      ${sql.raw(ancestors('chain', '(SELECT parent_id FROM args)'))},
      depth_ok AS (
        SELECT 1 FROM args WHERE args.parent_id IS NULL OR (SELECT max(level) FROM chain) + 1 <= ${MAX_TASK_DEPTH}
      ),
      allowed AS (SELECT 1 FROM args WHERE ${holdsRoom('tasks', value('me'), { room: value('room'), limit: value('limit') })}),
      tags_ok AS (
        SELECT 1 FROM args
        WHERE (SELECT count(*) FROM tags WHERE id = ANY(args.tag_ids) AND ${sql.raw(tagFits('tags', 'args.owner_id', 'args.project_id'))})
          = cardinality(args.tag_ids)
      ),
      task AS (
        INSERT INTO tasks (id, owner_id, assignee_id, project_id, parent_id, title, description, status, priority, due_at, completed_at, created_at, updated_at)
        SELECT ${value('id')}::uuid, args.owner_id, args.assignee_id, args.project_id, args.parent_id, ${value('title')}, ${value('description')},
               ${value('status')}::"TaskStatus", ${value('priority')}::"TaskPriority", ${value('dueAt')}::timestamptz,
               ${value('completedAt')}::timestamptz, args.now, args.now
        FROM args, allowed, tags_ok, project_ok, assignee_ok, parent_ok, depth_ok
        RETURNING id
      ),
      links AS (
        INSERT INTO task_tags (task_id, tag_id, created_at)
        SELECT task.id, tag_id, args.now FROM task, args, unnest(args.tag_ids) AS tag_id
      )
      SELECT (SELECT count(*) FROM allowed)::int AS allowed, (SELECT count(*) FROM tags_ok)::int AS tags_ok,
             EXISTS (SELECT 1 FROM project_ok) AS project_ok, EXISTS (SELECT 1 FROM assignee_ok) AS assignee_ok,
             EXISTS (SELECT 1 FROM parent_ok) AS parent_ok, EXISTS (SELECT 1 FROM depth_ok) AS depth_ok`);
});

interface CreateChecks {
  allowed: number;
  project_ok: boolean;
  assignee_ok: boolean;
  tags_ok: number;
  parent_ok: boolean;
  depth_ok: boolean;
}

/** The creation's event, and what it does to its parent (see insertTask). */
const createEvent = preparedQuery<CreateValue, { count: string }, '', CreateValues>((value) =>
  rawQuery(sql`
        WITH args AS (SELECT ${value('now')}::timestamptz AS now, ${value('me')}::uuid AS me),
        -- The parent gains a subtask (and a done one, when it is created done).
        deltas AS (
          SELECT ${sql.raw(delta('tasks.parent_id', { subtasks: '1', done: "tasks.status = 'done'" }))}
          FROM tasks WHERE tasks.id = ${value('id')} AND tasks.parent_id IS NOT NULL
        ),
        ${sql.raw(ripple('(SELECT now FROM args)'))},
        ${oneEvent({
          id: value('eventId'),
          type: 'task.created',
          data: sql`jsonb_build_object('task', ${taskJson()})`,
          row: 'tasks',
          actorId: sql`args.me`,
          from: sql`tasks, args WHERE tasks.id = ${value('id')}`,
          also: rippleEvents('(SELECT me FROM args)'),
        })}
        SELECT count(*) FROM inserted`),
);

/**
 * Inserts a task with its tag links and its `task.created` event, in one round trip. The claim
 * locks the owner's row (shared far from the limit, else exclusively) and the insert happens only
 * if the owner's holdings leave room and every tag is theirs.
 */
export async function insertTask(
  ctx: AppContext,
  principal: Principal,
  input: TaskCreate,
  claim: QuotaClaim,
  now: Date,
  completedAt: Date | null,
): Promise<CreateOutcome> {
  const tagIds = [...new Set(input.tagIds)];
  const { room, limit } = claimBounds(claim, 1n);
  const { parentId, projectId } = input;
  const values: CreateValues = {
    id: uuidv7(),
    eventId: uuidv7(),
    me: principal.userId,
    now,
    tagIds,
    room,
    limit,
    projectId,
    assigneeId: input.assigneeId,
    parentId,
    title: input.title,
    description: input.description,
    status: input.status,
    priority: input.priority,
    dueAt: input.dueAt,
    completedAt,
    members: [principal.userId, input.assigneeId].filter((id) => id !== null),
  };
  const { checks, created } = await ctx.db.sql.pipeline({
    lock: [
      ...claimLock(claim, principal.userId),
      ...(projectId === null ? [] : [createMemberships(values, '')]),
      ...(tagIds.length === 0 ? [] : [createTagLocks(values, '')]),
      ...(parentId === null ? [] : createAttachLocks.map((lock) => lock(values, ''))),
    ],
    checks: createStatement(values, isAdmin(principal) ? 'admin' : 'member'),
    savepoint: SAVEPOINT,
    event: [createEvent(values, ''), ...settleTaskEvents],
    created: shownTaskById({ taskId: values.id }, ''),
  });
  const [check] = checks;
  const [row] = created;
  if (check?.project_ok === false) return { kind: 'unknown_project' };
  if (check?.assignee_ok === false) return { kind: 'assignee_not_member' };
  if (check?.tags_ok === 0) return { kind: 'unknown_tag' };
  if (check?.parent_ok === false) return { kind: 'unknown_parent' };
  if (check?.depth_ok === false) return { kind: 'too_deep' };
  if (check?.allowed === 0 || !row) return { kind: 'no_room' };
  return { kind: 'created', task: row.task };
}

/** What a change's checks found, in the order they are made: the first that fails is the answer. */
export type ChangeOutcome =
  | { kind: 'not_found' }
  | {
      kind:
        | 'forbidden'
        | 'read_only'
        | 'forbidden_move'
        | 'unknown_project'
        | 'assignee_not_member'
        | 'unknown_parent'
        | 'parent_cycle'
        | 'too_deep';
    }
  | { kind: 'stale'; version: number }
  | { kind: 'unchanged' | 'changed'; task: Task };

interface Verdict {
  outcome:
    | 'not_found'
    | 'read_only'
    | 'unknown_project'
    | 'forbidden_move'
    | 'forbidden'
    | 'assignee_not_member'
    | 'unknown_parent'
    | 'parent_cycle'
    | 'too_deep'
    | 'stale'
    | 'unchanged'
    | 'apply';
  version: number;
}

/** The fields a change may write: the patch's name, the column, and the column's type. */
const CHANGEABLE: [keyof TaskPatch, string, string][] = [
  ['title', 'title', 'text'],
  ['description', 'description', 'text'],
  ['status', 'status', '"TaskStatus"'],
  ['priority', 'priority', '"TaskPriority"'],
  ['assigneeId', 'assignee_id', 'uuid'],
  ['dueAt', 'due_at', 'timestamptz(3)'],
  ['projectId', 'project_id', 'uuid'],
  ['parentId', 'parent_id', 'uuid'],
];

/** The values a change's statements take (the rest decides their form: a ChangeShape). */
type ChangeValue = 'taskId' | 'me' | 'patch' | 'versions' | 'now' | 'eventId' | 'parentId' | 'projectId' | 'members';

interface ChangeValues extends Record<ChangeValue, unknown> {
  taskId: string;
  me: string;
  /** The patch as JSON. */
  patch: string;
  versions: number[] | null;
  now: Date;
  eventId: string;
  parentId: string | null;
  /** The project the change moves the task to, if it names one. */
  projectId: string | null;
  /** The users whose memberships the change relies on. */
  members: string[];
}

/** Where a task put under a new parent ends up: in its own project (or none), or in the one the change names. */
type ParentIn = 'task project' | 'named project';

/** The task's row, locked against other writers. */
const changeLock = preparedQuery<ChangeValue, { locked: number }, '', ChangeValues>((value) =>
  lockTask(value('taskId'), false),
);

/** The memberships the change relies on, the caller's and the assignee's, in the task's project and the target. */
const changeMemberships = preparedQuery<ChangeValue, { held: number }, '', ChangeValues>((value) => {
  // In the task's project (read once the task is locked) and in the one it moves to.
  const current = tables.selectFrom('tasks').select('tasks.project_id').where('tasks.id', '=', value('taskId'));
  return heldMemberships(value('members'), (eb) =>
    eb.or([eb('project_members.project_id', '=', current), eb('project_members.project_id', '=', value('projectId'))]),
  );
});

/** Under a new parent: the hierarchy of the project the task ends up in (or its owner's), then the parent's row. */
const changeHierarchyLock = preparedQuery<ChangeValue, { locked: unknown }, ParentIn, ChangeValues>(
  (value, parentIn) => {
    const project = parentIn === 'named project' ? sql`${value('projectId')}::uuid` : sql`tasks.project_id`;
    return attachHierarchyLock(
      sql`(SELECT COALESCE(${project}, tasks.owner_id) FROM tasks WHERE tasks.id = ${value('taskId')})`,
    );
  },
);
const changeParentLock = preparedQuery<ChangeValue, { locked: number }, '', ChangeValues>((value) =>
  parentRowLock(value('parentId')),
);

/**
 * The change itself: the checks on the row as it is once locked, the update, what it does to the
 * tasks around it, and its events, in one statement (see updateTask).
 */
const changeStatement = preparedQuery<ChangeValue, Verdict, Writer, ChangeValues>((value, writer) => {
  const admin = writer === 'admin';
  // The patch is the CTE args' `patch` (jsonb): whether it sends a field, and the value it sends.
  const sent = (field: keyof TaskPatch) => sql`args.patch ? ${sql.lit(field)}`;
  const sentValue = (field: keyof TaskPatch) => sql`args.patch ->> ${sql.lit(field)}`;
  const each = (write: (field: keyof TaskPatch, column: string, type: string) => RawBuilder<unknown>) =>
    sql.join(CHANGEABLE.map(([field, column, type]) => write(field, column, type)));
  const reassigns = sql`(cur.next_assignee_id IS DISTINCT FROM cur.assignee_id)`;
  const moves = sql`(cur.next_project_id IS DISTINCT FROM cur.project_id)`;
  // On a personal task only its owner (or an admin) reassigns it; its assignee may hand it back.
  const mayReassign = admin
    ? sql`true`
    : sql`(cur.next_project_id IS NOT NULL OR cur.owner_id = args.me OR (cur.next_assignee_id IS NULL AND cur.assignee_id = args.me))`;
  // A project the caller cannot see is as unknown as one that does not exist (400, never 403).
  // A task moved to another project leaves its parent there, unless the change names a new one.
  const leavesParent = sql`WHEN (CASE WHEN ${sent('projectId')} THEN (${sentValue('projectId')})::uuid ELSE tasks.project_id END)
    IS DISTINCT FROM tasks.project_id THEN NULL`;
  const newParent = sql`(cur.next_parent_id IS NOT NULL AND cur.next_parent_id IS DISTINCT FROM cur.parent_id)`;
  const targetSeen = admin
    ? sql`EXISTS (SELECT 1 FROM projects p WHERE p.id = cur.next_project_id)`
    : sql.raw(isMemberOf('cur.next_project_id', 'args.me'));
  const viewer: Viewer = admin ? { kind: 'all' } : { kind: 'member', userId: value('me') };
  return rawQuery(sql<Verdict>`
      WITH RECURSIVE args AS (
        SELECT ${value('patch')}::jsonb AS patch, ${value('me')}::uuid AS me,
               ${value('versions')}::int[] AS versions, ${value('now')}::timestamptz AS now
      ),
      proposed AS (
        SELECT tasks.*, (${visibleHere(viewer)}) IS TRUE AS visible, (${writableHere(viewer)}) IS TRUE AS writable,
          ${each((field, column, type) => sql`CASE WHEN ${sent(field)} THEN (${sentValue(field)})::${sql.raw(type)} ${field === 'parentId' ? leavesParent : sql``} ELSE tasks.${sql.raw(column)} END AS ${sql.raw(`next_${column}`)}`)}
        FROM tasks, args WHERE tasks.id = ${value('taskId')}
      ),
      -- The new parent, when the change gives one: where it is, whether the caller sees it, its
      -- ancestors (a cycle if the task is among them), and how far the task's subtree reaches below it.
      parent AS (
        SELECT tasks.id, tasks.project_id, tasks.owner_id, (${visibleHere(viewer)}) IS TRUE AS visible
        FROM tasks, proposed cur
        WHERE tasks.id = cur.next_parent_id AND cur.next_parent_id IS DISTINCT FROM cur.parent_id
      ),
      ${sql.raw(ancestors('chain', '(SELECT id FROM parent)'))},
      ${sql.raw(descendants('subtree', '(SELECT cur.id FROM proposed cur, parent WHERE cur.next_project_id IS NOT DISTINCT FROM cur.project_id)'))},
      verdict AS (
        SELECT cur.*, CASE
            WHEN NOT cur.visible THEN 'not_found'
            WHEN NOT cur.writable THEN 'read_only'
            WHEN ${moves} AND cur.next_project_id IS NOT NULL AND (${targetSeen}) IS NOT TRUE THEN 'unknown_project'
            WHEN ${moves} AND cur.next_project_id IS NOT NULL
              AND (${sql.raw(writesInto(admin, 'cur.next_project_id', 'args.me'))}) IS NOT TRUE THEN 'forbidden_move'
            WHEN ${moves} AND (cur.project_id IS NULL OR cur.next_project_id IS NULL)
              AND ${sql.raw(admin ? 'false' : 'cur.owner_id <> args.me')} THEN 'forbidden_move'
            WHEN ${reassigns} AND ${mayReassign} IS NOT TRUE THEN 'forbidden'
            WHEN (${reassigns} OR ${moves}) AND cur.next_project_id IS NOT NULL AND cur.next_assignee_id IS NOT NULL
              AND NOT ${sql.raw(isMemberOf('cur.next_project_id', 'cur.next_assignee_id'))} THEN 'assignee_not_member'
            WHEN ${newParent} AND NOT EXISTS (
              SELECT 1 FROM parent p WHERE p.visible AND ${sql.raw(sameHierarchy('p', 'cur.next_project_id', 'cur.owner_id'))}
            ) THEN 'unknown_parent'
            WHEN ${newParent} AND EXISTS (SELECT 1 FROM chain WHERE chain.id = cur.id) THEN 'parent_cycle'
            WHEN ${newParent} AND (SELECT max(level) FROM chain) + COALESCE((SELECT max(height) FROM subtree), 1) > ${MAX_TASK_DEPTH}
              THEN 'too_deep'
            WHEN args.versions IS NOT NULL AND NOT (cur.version = ANY(args.versions)) THEN 'stale'
            WHEN ${sql.join(
              CHANGEABLE.map(([, column]) => sql.raw(`cur.next_${column} IS DISTINCT FROM cur.${column}`)),
              sql` OR `,
            )} THEN 'apply'
            ELSE 'unchanged' END AS outcome
        FROM proposed cur, args
      ),
      updated AS (
        UPDATE tasks t SET ${each((_, column) => sql.raw(`${column} = v.next_${column}`))},
          completed_at = CASE WHEN v.next_status <> 'done' THEN NULL WHEN v.status = 'done' THEN v.completed_at ELSE args.now END,
          -- A move leaves its subtasks behind (deltas), so it has none in its new place.
          subtask_count = CASE WHEN v.next_project_id IS DISTINCT FROM v.project_id THEN 0 ELSE t.subtask_count END,
          subtasks_done = CASE WHEN v.next_project_id IS DISTINCT FROM v.project_id THEN 0 ELSE t.subtasks_done END,
          version = t.version + 1, updated_at = args.now
        FROM verdict v, args WHERE t.id = v.id AND v.outcome = 'apply'
        RETURNING t.*, v.assignee_id AS former_assignee_id, v.project_id AS former_project_id,
          v.parent_id AS former_parent_id, v.status = 'done' AS was_done
      ),
      -- What the change does to the tasks around it (hierarchy.ts): the former parent loses it and
      -- the new one gains it, or its parent counts it done or not done any more; the tasks it blocks
      -- gain or lose an unfinished blocker; a move leaves its subtasks behind as top-level tasks.
      deltas AS (
        SELECT ${sql.raw(delta('u.former_parent_id', { subtasks: '-1', done: '-(u.was_done)::int' }))}
        FROM updated u WHERE u.former_parent_id IS DISTINCT FROM u.parent_id
        UNION ALL
        SELECT ${sql.raw(delta('u.parent_id', { subtasks: '1', done: "u.status = 'done'" }))}
        FROM updated u WHERE u.former_parent_id IS DISTINCT FROM u.parent_id
        UNION ALL
        SELECT ${sql.raw(delta('u.parent_id', { done: "(u.status = 'done')::int - (u.was_done)::int" }))}
        FROM updated u WHERE u.former_parent_id = u.parent_id AND (u.status = 'done') <> u.was_done
        UNION ALL
        SELECT ${sql.raw(delta('r.other_task_id', { blockers: "CASE WHEN u.status = 'done' THEN -1 ELSE 1 END" }))}
        FROM updated u JOIN task_relations r ON r.task_id = u.id AND r.type = 'blocks'
        WHERE (u.status = 'done') <> u.was_done
        UNION ALL
        SELECT ${sql.raw(delta('c.id', { detachFrom: 'u.id' }))}
        FROM updated u JOIN tasks c ON c.parent_id = u.id WHERE u.project_id IS DISTINCT FROM u.former_project_id
      ),
      ${sql.raw(ripple('(SELECT now FROM args)'))},
      unfit_tags AS (
        DELETE FROM task_tags tt USING updated u, tags
        WHERE tt.task_id = u.id AND tags.id = tt.tag_id AND NOT ${sql.raw(tagFits('tags', 'u.owner_id', 'u.project_id'))}
      ),
      ${oneEvent({
        id: value('eventId'),
        type: 'task.updated',
        data: sql.raw(taskEventStub('u')),
        row: 'u',
        former: 'u.former_assignee_id',
        formerProject: 'u.former_project_id',
        actorId: sql`args.me`,
        from: sql`updated u, args`,
        also: rippleEvents('(SELECT me FROM args)'),
      })}
      SELECT outcome, version FROM verdict`);
});

/**
 * Applies `change` to the task with its row locked: the checks (visible, writable, a move the
 * caller may make, may reassign, the assignee a member of the task's project, If-Match, changes
 * anything) on the row as it is then, the update, and its `task.updated` event, in one round trip.
 * Only the fields sent are written; `completedAt` follows the status; a move drops the tags that
 * do not fit the task's new project (tagFits), so the event is settled after the statement.
 */
export async function updateTask(
  ctx: AppContext,
  principal: Principal,
  taskId: string,
  ifMatch: string | undefined,
  change: TaskPatch,
  now: Date,
): Promise<ChangeOutcome> {
  const parentIn: ParentIn | undefined = !change.parentId
    ? undefined
    : change.projectId === undefined
      ? 'task project'
      : 'named project';
  const values: ChangeValues = {
    taskId,
    me: principal.userId,
    patch: JSON.stringify(change),
    versions: ifMatchVersions(ifMatch),
    now,
    eventId: uuidv7(),
    parentId: change.parentId ?? null,
    projectId: change.projectId ?? null,
    members: [principal.userId, change.assigneeId ?? null].filter((id) => id !== null),
  };
  const { verdict, task } = await ctx.db.sql.pipeline({
    lock: [
      changeLock(values, ''),
      changeMemberships(values, ''),
      ...(parentIn === undefined ? [] : [changeHierarchyLock(values, parentIn), changeParentLock(values, '')]),
    ],
    savepoint: SAVEPOINT,
    verdict: changeStatement(values, isAdmin(principal) ? 'admin' : 'member'),
    placed: settleTaskEvents,
    // Read back without the visibility rule: an assignee who just handed the task back made a
    // change that took, even though they no longer see the task.
    task: shownTaskById({ taskId }, ''),
  });
  const [found] = verdict;
  const [row] = task;
  if (!found || !row || found.outcome === 'not_found') return { kind: 'not_found' };
  if (found.outcome === 'stale') return { kind: 'stale', version: found.version };
  if (found.outcome === 'apply' || found.outcome === 'unchanged')
    return { kind: found.outcome === 'apply' ? 'changed' : 'unchanged', task: row.task };
  return { kind: found.outcome };
}

export type DeleteOutcome =
  | { kind: 'not_found' }
  | { kind: 'forbidden' }
  | { kind: 'stale'; version: number }
  | { kind: 'deleted'; storageKeys: string[] };

/**
 * Deletes the task (owner or admin) with its row locked against every other lock, so no upload or
 * link is made meanwhile: its attachments' storage keys are then all of them. Writes `task.deleted`.
 */
export async function removeTask(
  ctx: AppContext,
  principal: Principal,
  taskId: string,
  ifMatch: string | undefined,
): Promise<DeleteOutcome> {
  const eventId = uuidv7();
  // A personal task's owner, an editor or admin of the task's project, or an app admin.
  const mayDelete = isAdmin(principal)
    ? sql`true`
    : sql`CASE WHEN tasks.project_id IS NULL THEN tasks.owner_id = args.me ELSE ${writableHere(visibleTasks(principal))} END`;
  const { verdict } = await ctx.db.sql.pipeline({
    lock: [lockTask(taskId, true)],
    savepoint: SAVEPOINT,
    verdict: rawQuery(sql<Verdict & { storage_keys: string[] }>`
      WITH args AS (SELECT ${principal.userId}::uuid AS me, ${ifMatchVersions(ifMatch)}::int[] AS versions, ${new Date()}::timestamptz AS now),
      verdict AS (
        SELECT tasks.*, CASE
            WHEN (${visibleHere(visibleTasks(principal))}) IS NOT TRUE THEN 'not_found'
            WHEN (${mayDelete}) IS NOT TRUE THEN 'forbidden'
            WHEN args.versions IS NOT NULL AND NOT (tasks.version = ANY(args.versions)) THEN 'stale'
            ELSE 'apply' END AS outcome
        FROM tasks, args WHERE tasks.id = ${taskId}
      ),
      doomed AS (SELECT a.storage_key FROM attachments a JOIN verdict v ON a.task_id = v.id AND v.outcome = 'apply'),
      deleted AS (
        DELETE FROM tasks t USING verdict v WHERE t.id = v.id AND v.outcome = 'apply'
        RETURNING t.id, t.owner_id, t.assignee_id, t.project_id, t.parent_id, t.status
      ),
      -- Its parent loses a subtask, the tasks it blocked lose a blocker (when it was not done), and
      -- its subtasks become top-level (hierarchy.ts). Its relations go with it (foreign keys).
      deltas AS (
        SELECT ${sql.raw(delta('d.parent_id', { subtasks: '-1', done: "-(d.status = 'done')::int" }))}
        FROM deleted d WHERE d.parent_id IS NOT NULL
        UNION ALL
        SELECT ${sql.raw(delta('r.other_task_id', { blockers: '-1' }))}
        FROM deleted d JOIN task_relations r ON r.task_id = d.id AND r.type = 'blocks' WHERE d.status <> 'done'
        UNION ALL
        SELECT ${sql.raw(delta('c.id', { detachFrom: 'd.id' }))} FROM deleted d JOIN tasks c ON c.parent_id = d.id
      ),
      ${sql.raw(ripple('(SELECT now FROM args)'))},
      ${oneEvent({
        id: eventId,
        type: 'task.deleted',
        data: sql`jsonb_build_object('taskId', d.id)`,
        row: 'd',
        actorId: sql`args.me`,
        from: sql`deleted d, args`,
        also: rippleEvents('(SELECT me FROM args)'),
      })}
      SELECT outcome, version, ARRAY(SELECT storage_key FROM doomed) AS storage_keys FROM verdict`),
    placed: settleTaskEvents,
  });
  const [found] = verdict;
  if (!found || found.outcome === 'not_found') return { kind: 'not_found' };
  if (found.outcome === 'forbidden') return { kind: 'forbidden' };
  if (found.outcome === 'stale') return { kind: 'stale', version: found.version };
  return { kind: 'deleted', storageKeys: found.storage_keys };
}
