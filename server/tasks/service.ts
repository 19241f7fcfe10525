import type { Task, TaskCreate, TaskListQuery, TaskPatch, TaskStatus } from '@task-service/client';
import { discardStoredBytes } from '../storage/stored-bytes.js';
import type { AppContext } from '../context.js';
import { isMissingRow, violatedConstraint } from '../db/errors.js';
import { announceEvents } from '../events/signal.js';
import { quotaClaims, quotaExceeded } from '../quotas.js';
import { AppError, invalidField, notFound } from '../http/errors.js';
import { entityTag } from '../http/etags.js';
import { toPage, type ListExchange, type Page } from '../http/pagination.js';
import type { Principal } from '../http/principal.js';
import { taskCursor } from './list-query.js';
import { MAX_TASK_DEPTH } from './hierarchy.js';
import { inTaskSet, visibleTasks, type TaskSet } from './queries.js';
import { preparedQuery, tables } from '../db/query.js';
import { insertTask, readTaskPage, readVisibleTask, removeTask, updateTask } from './store.js';

/** The tasks of `set` (the caller's visibility already decided) matching the query, one page. */
export async function listTasks(
  ctx: AppContext,
  set: TaskSet,
  query: TaskListQuery,
  http: ListExchange,
): Promise<Page<Task>> {
  const cursor = ctx.cursors.decode(query.cursor, query.sort);
  const tasks = await readTaskPage(ctx, set, query, cursor, query.limit + 1);
  return toPage(
    ctx.cursors,
    http,
    tasks,
    query.limit,
    (task) => taskCursor(query.sort, task),
    (task) => task,
  );
}

/** findVisibleTaskRef's statement, built once per kind of caller (every comment and activity page runs it). */
const visibleTaskRef = preparedQuery((value: (key: 'taskId' | 'userId') => string, kind: TaskSet['kind']) =>
  tables
    .selectFrom('tasks')
    .select(['tasks.id', 'tasks.owner_id as ownerId', 'tasks.version'])
    .where('tasks.id', '=', value('taskId'))
    .where(inTaskSet(kind === 'all' ? { kind } : { kind, userId: value('userId') })),
);

/** The id and owner of a task the caller may see, or 404: for checks that need no more. */
export async function findVisibleTaskRef(
  ctx: AppContext,
  principal: Principal,
  taskId: string,
): Promise<{ id: string; ownerId: string; version: number }> {
  const set = visibleTasks(principal);
  const row = await ctx.db.sql.first(visibleTaskRef({ taskId, userId: principal.userId }, set.kind));
  if (!row) throw notFound('task');
  return row;
}

/** A task the caller may see, or 404 (never 403: another user's task does not exist for them). */
export async function findVisibleTask(ctx: AppContext, principal: Principal, taskId: string): Promise<Task> {
  const task = await readVisibleTask(ctx, principal, taskId);
  if (!task) throw notFound('task');
  return task;
}

/** The assignee or a tag was deleted between the check and the write. */
const referenceGone = () =>
  invalidField('body', 'unknown_reference', 'A user or tag this task refers to no longer exists');

const staleVersion = (version: number) =>
  new AppError('precondition_failed', `The task is at version ${version}`, { headers: { ETag: entityTag(version) } });

/** A write that referred to a row that does not exist: the assignee (no such user), else one deleted meanwhile. */
function missingReference(error: unknown): unknown {
  if (!isMissingRow(error)) return error;
  if (violatedConstraint(error) === 'tasks_assignee_id_fkey')
    return invalidField('body.assigneeId', 'unknown_user', 'No user has this id');
  // The parent was deleted between the checks and the write.
  if (violatedConstraint(error) === 'tasks_parent_id_fkey') return unknownParent();
  return referenceGone();
}

const unknownProject = () =>
  invalidField('body.projectId', 'unknown_project', 'No project of yours where you are an editor or admin has this id');

const assigneeNotMember = () =>
  invalidField('body.assigneeId', 'not_a_member', "The assignee of a project's task must be a member of the project");

const unfitTag = () =>
  invalidField(
    'body.tagIds',
    'unknown_tag',
    "Every tag must be the project's own on a project task, or one of the owner's personal tags on a personal task",
  );

const unknownParent = () =>
  invalidField(
    'body.parentId',
    'unknown_parent',
    'The parent must be a task you see, in the same project (or, for a personal task, a personal task of the same owner)',
  );

const parentCycle = () =>
  invalidField('body.parentId', 'parent_cycle', 'A task cannot be put under itself or under one of its own subtasks');

const tooDeep = () =>
  invalidField(
    'body.parentId',
    'too_deep',
    `Tasks nest at most ${MAX_TASK_DEPTH} levels deep (a top-level task is level 1), its subtasks included`,
  );

/** completedAt follows status: set on entering done, kept while done, cleared on leaving it (updates: in SQL, store.ts). */
const completion = (status: TaskStatus, now: Date): Date | null => (status === 'done' ? now : null);

/** One round trip (store.ts), tried far from the quota's limit first, then with the user's row held exclusively. */
export async function createTask(ctx: AppContext, principal: Principal, input: TaskCreate): Promise<Task> {
  const now = new Date();
  try {
    for (const claim of await quotaClaims(ctx, principal, 'tasks')) {
      const outcome = await insertTask(ctx, principal, input, claim, now, completion(input.status, now));
      if (outcome.kind === 'unknown_project') throw unknownProject();
      if (outcome.kind === 'assignee_not_member') throw assigneeNotMember();
      if (outcome.kind === 'unknown_tag') throw unfitTag();
      if (outcome.kind === 'unknown_parent') throw unknownParent();
      if (outcome.kind === 'too_deep') throw tooDeep();
      if (outcome.kind === 'created') {
        announceEvents(ctx);
        return outcome.task;
      }
    }
  } catch (error) {
    throw missingReference(error);
  }
  throw quotaExceeded('tasks', ctx.config.quotas.tasks);
}

/**
 * Applies a change to a visible task with its row locked, so concurrent changes apply one after the
 * other and none is lost; only If-Match can refuse one (412). Only the fields sent are written.
 * Only the owner or an admin reassigns a task; its assignee may only hand it back (null).
 */
export async function changeTask(
  ctx: AppContext,
  principal: Principal,
  taskId: string,
  ifMatch: string | undefined,
  change: TaskPatch,
): Promise<Task> {
  const outcome = await updateTask(ctx, principal, taskId, ifMatch, change, new Date()).catch((error: unknown) => {
    throw missingReference(error);
  });
  switch (outcome.kind) {
    case 'not_found':
      throw notFound('task');
    case 'forbidden':
      throw new AppError(
        'forbidden',
        'Only the owner of a task or an admin may change its assignee; the assignee may only set it to null',
      );
    case 'read_only':
      throw new AppError('forbidden', "Only an editor or admin of the task's project may change it");
    case 'forbidden_move':
      throw new AppError(
        'forbidden',
        'Moving a task between projects needs editor or admin in both; moving it in or out of a project needs its owner or an admin',
      );
    case 'unknown_project':
      throw unknownProject();
    case 'assignee_not_member':
      throw assigneeNotMember();
    case 'unknown_parent':
      throw unknownParent();
    case 'parent_cycle':
      throw parentCycle();
    case 'too_deep':
      throw tooDeep();
    case 'stale':
      throw staleVersion(outcome.version);
    case 'changed':
      announceEvents(ctx);
      return outcome.task;
    case 'unchanged':
      return outcome.task;
  }
}

/** Owner or admin. Of concurrent deletes one succeeds; the others find no task (404), whatever their If-Match. */
export async function deleteTask(
  ctx: AppContext,
  principal: Principal,
  taskId: string,
  ifMatch: string | undefined,
): Promise<void> {
  const outcome = await removeTask(ctx, principal, taskId, ifMatch);
  switch (outcome.kind) {
    case 'not_found':
      throw notFound('task');
    case 'forbidden':
      throw new AppError(
        'forbidden',
        "Only the owner of a personal task, an editor or admin of a project's task, or an admin may delete it",
      );
    case 'stale':
      throw staleVersion(outcome.version);
    case 'deleted':
      announceEvents(ctx);
      await discardStoredBytes(ctx, outcome.storageKeys);
  }
}
