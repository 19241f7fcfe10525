import { TimestampInputSchema } from '../../contract/common.js';
import { TaskPrioritySchema, type TaskListQuery, type TaskPriority, type TaskSort } from '../../contract/tasks.js';
import { containsText } from '../db/search.js';
import type { Prisma } from '../generated/prisma/client.js';
import { z } from 'zod';
import { invalidCursor, type Cursor } from '../http/pagination.js';
import { isAdmin, type Principal } from '../http/principal.js';
import type { TaskRow } from './serialize.js';

/** The one visibility rule: admins see every task, others what they own or are assigned to. */
export function taskVisibleTo(principal: Principal): Prisma.TaskWhereInput {
  if (isAdmin(principal)) return {};
  return { OR: [{ ownerId: principal.userId }, { assigneeId: principal.userId }] };
}

/** One task by id, if the caller may see it. */
export const visibleTask = (principal: Principal, taskId: string): Prisma.TaskWhereInput => ({ AND: [{ id: taskId }, taskVisibleTo(principal)] });

/** The filters of GET /tasks as a where clause. dueAfter is inclusive, dueBefore exclusive. */
export function taskFilters(query: TaskListQuery): Prisma.TaskWhereInput[] {
  const where: Prisma.TaskWhereInput[] = [];
  if (query.status) where.push({ status: { in: query.status } });
  if (query.priority) where.push({ priority: { in: query.priority } });
  for (const tagId of query.tagId ?? []) where.push({ tags: { some: { tagId } } });
  if (query.assigneeId) where.push({ assigneeId: query.assigneeId });
  if (query.ownerId) where.push({ ownerId: query.ownerId });
  if (query.dueAfter) where.push({ dueAt: { gte: new Date(query.dueAfter) } });
  if (query.dueBefore) where.push({ dueAt: { lt: new Date(query.dueBefore) } });
  if (query.updatedSince) where.push({ updatedAt: { gte: new Date(query.updatedSince) } });
  if (query.q) {
    where.push({ OR: [{ title: containsText(query.q) }, { description: containsText(query.q) }] });
  }
  return where;
}

type SortField = 'createdAt' | 'updatedAt' | 'dueAt' | 'priority' | 'title';
type Direction = 'asc' | 'desc';

const SORTS: Record<TaskSort, { field: SortField; direction: Direction }> = {
  createdAt: { field: 'createdAt', direction: 'asc' },
  '-createdAt': { field: 'createdAt', direction: 'desc' },
  updatedAt: { field: 'updatedAt', direction: 'asc' },
  '-updatedAt': { field: 'updatedAt', direction: 'desc' },
  dueAt: { field: 'dueAt', direction: 'asc' },
  '-dueAt': { field: 'dueAt', direction: 'desc' },
  priority: { field: 'priority', direction: 'asc' },
  '-priority': { field: 'priority', direction: 'desc' },
  title: { field: 'title', direction: 'asc' },
  '-title': { field: 'title', direction: 'desc' },
};
const parseSort = (sort: TaskSort) => SORTS[sort];

/** A cursor's sort value parsed as its field expects; anything else is a forged cursor (400). */
function cursorValue<T extends z.ZodTypeAny>(schema: T, value: unknown): z.infer<T> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw invalidCursor();
  return parsed.data;
}
const CursorDate = TimestampInputSchema.transform((s) => new Date(s));

/** Tasks without a due date come after those with one when ascending, first when descending. */
export function taskOrderBy(sort: TaskSort): Prisma.TaskOrderByWithRelationInput[] {
  const { field, direction } = parseSort(sort);
  const primary: Prisma.TaskOrderByWithRelationInput =
    field === 'dueAt' ? { dueAt: { sort: direction, nulls: direction === 'asc' ? 'last' : 'first' } } : { [field]: direction };
  return [primary, { id: direction }];
}

/** The sort value of a row, as a cursor keeps it. */
export function taskCursor(sort: TaskSort, row: TaskRow): Cursor {
  const { field } = parseSort(sort);
  const value = row[field];
  return { s: sort, v: value instanceof Date ? value.toISOString() : value, id: row.id };
}

const PRIORITIES = TaskPrioritySchema.options;
function prioritiesBeyond(value: TaskPriority, direction: Direction): TaskPriority[] {
  const index = PRIORITIES.indexOf(value);
  return direction === 'asc' ? PRIORITIES.slice(index + 1) : PRIORITIES.slice(0, index);
}

/** Rows strictly after the cursor in the sort order (keyset pagination). */
export function taskAfter(sort: TaskSort, cursor: Cursor): Prisma.TaskWhereInput {
  const { field, direction } = parseSort(sort);
  const cmp = direction === 'asc' ? 'gt' : 'lt';
  const idAfter: Prisma.TaskWhereInput = { id: { [cmp]: cursor.id } };
  switch (field) {
    case 'createdAt':
    case 'updatedAt': {
      const at = cursorValue(CursorDate, cursor.v);
      return { OR: [{ [field]: { [cmp]: at } }, { [field]: at, ...idAfter }] };
    }
    case 'title': {
      const title = cursorValue(z.string(), cursor.v);
      return { OR: [{ title: { [cmp]: title } }, { title, ...idAfter }] };
    }
    case 'priority': {
      const priority = cursorValue(TaskPrioritySchema, cursor.v);
      return { OR: [{ priority: { in: prioritiesBeyond(priority, direction) } }, { priority, ...idAfter }] };
    }
    case 'dueAt': {
      const at = cursorValue(CursorDate.nullable(), cursor.v);
      if (at === null) {
        // Nulls are last ascending (only nulls follow) and first descending (every dated task follows).
        return direction === 'asc'
          ? { dueAt: null, ...idAfter }
          : { OR: [{ dueAt: null, ...idAfter }, { dueAt: { not: null } }] };
      }
      const after: Prisma.TaskWhereInput[] = [{ dueAt: { [cmp]: at } }, { dueAt: at, ...idAfter }];
      return { OR: direction === 'asc' ? [...after, { dueAt: null }] : after };
    }
  }
}
