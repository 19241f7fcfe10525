import { v7 as uuidv7 } from 'uuid';
import type { Tag, TagCreate, TagListQuery, TagPatch } from '../../contract/tags.js';
import type { AppContext } from '../context.js';
import { isMissingRow, isUniqueViolation } from '../db/errors.js';
import { recordTaskUpdates, tagChanged, tagDeleted } from '../events/domain-events.js';
import { recordEvent } from '../events/outbox.js';
import { AppError, notFound } from '../http/errors.js';
import { createdAfter, creationCursor, toPage, type ListExchange, type Page } from '../http/pagination.js';
import type { Principal } from '../http/principal.js';
import { touchTasks } from '../tasks/versions.js';
import { defaultColorFor, nameKeyOf, tagFilters, tagVisibleTo } from './queries.js';
import { serializeTag, type TagRow } from './serialize.js';

const tagNameTaken = (name: string) => new AppError('tag_name_taken', `You already have a tag named "${name}" (names ignore case)`);

/** Oldest first. */
export async function listTags(ctx: AppContext, principal: Principal, query: TagListQuery, http: ListExchange): Promise<Page<Tag>> {
  const rows = await ctx.db.prisma.tag.findMany({
    where: { AND: [tagVisibleTo(principal), ...tagFilters(query), ...createdAfter(query.cursor)] },
    orderBy: { id: 'asc' },
    take: query.limit + 1,
  });
  return toPage(http, rows, query.limit, creationCursor, serializeTag);
}

/** A tag the caller may see (their own; any for an admin), or 404. */
export async function findVisibleTag(ctx: AppContext, principal: Principal, tagId: string): Promise<TagRow> {
  const row = await ctx.db.prisma.tag.findFirst({ where: { AND: [{ id: tagId }, tagVisibleTo(principal)] } });
  if (!row) throw notFound('tag');
  return row;
}

export async function createTag(ctx: AppContext, principal: Principal, input: TagCreate): Promise<TagRow> {
  try {
    return await ctx.db.prisma.$transaction(async (tx) => {
      const tag = await tx.tag.create({
        data: {
          id: uuidv7(),
          ownerId: principal.userId,
          name: input.name,
          nameKey: nameKeyOf(input.name),
          color: (input.color ?? defaultColorFor(input.name)).toLowerCase(),
          createdAt: new Date(),
        },
      });
      await recordEvent(tx, principal.userId, tagChanged('tag.created', tag));
      return tag;
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw tagNameTaken(input.name);
    throw error;
  }
}

export async function updateTag(ctx: AppContext, principal: Principal, tagId: string, change: TagPatch): Promise<TagRow> {
  const tag = await findVisibleTag(ctx, principal, tagId);
  const name = change.name ?? tag.name;
  const color = change.color?.toLowerCase() ?? tag.color;
  if (name === tag.name && color === tag.color) return tag;
  try {
    return await ctx.db.prisma.$transaction(async (tx) => {
      // The tasks carrying the tag show its name and colour.
      const touched = await touchTasks(tx, { tags: { some: { tagId: tag.id } } });
      const updated = await tx.tag.update({ where: { id: tag.id }, data: { name, nameKey: nameKeyOf(name), color } });
      await recordTaskUpdates(tx, principal.userId, touched, [tagChanged('tag.updated', updated)]);
      return updated;
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw tagNameTaken(name);
    if (isMissingRow(error)) throw notFound('tag');
    throw error;
  }
}

/** Deletes a tag; every task that carried it changes its tag set, so it gets a new version. */
export async function deleteTag(ctx: AppContext, principal: Principal, tagId: string): Promise<void> {
  const tag = await findVisibleTag(ctx, principal, tagId);
  await ctx.db.prisma.$transaction(async (tx) => {
    // Links are inserted under a key-share lock on the tag, so once this holds, the set of tasks is final.
    const locked = await tx.$queryRaw<{ id: string }[]>`SELECT id FROM tags WHERE id = ${tag.id}::uuid FOR UPDATE`;
    if (locked.length === 0) throw notFound('tag');
    const touched = await touchTasks(tx, { tags: { some: { tagId: tag.id } } });
    await tx.tag.delete({ where: { id: tag.id } });
    await recordTaskUpdates(tx, principal.userId, touched, [tagDeleted(tag)]);
  });
}
