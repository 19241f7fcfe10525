import { v7 as uuidv7 } from 'uuid';
import { announceEvents, recordingEvents } from '../events/signal.js';
import type { Tag, TagCreate, TagListQuery, TagPatch } from '@task-service/client';
import type { AppContext } from '../context.js';
import { isUniqueViolation } from '../db/errors.js';
import { recordTaskUpdates, tagChanged, tagDeleted } from '../events/domain-events.js';
import { recordEvent } from '../events/outbox.js';
import type { Prisma } from '../generated/prisma/client.js';
import { withinQuota } from '../quotas.js';
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
    where: { AND: [tagVisibleTo(principal), ...tagFilters(query), ...createdAfter(ctx.cursors, query.cursor)] },
    orderBy: { id: 'asc' },
    take: query.limit + 1,
  });
  return toPage(ctx.cursors, http, rows, query.limit, creationCursor, serializeTag);
}

/** A tag the caller may see (their own; any for an admin), or 404. */
export async function findVisibleTag(ctx: AppContext, principal: Principal, tagId: string): Promise<TagRow> {
  const row = await ctx.db.prisma.tag.findFirst({ where: { AND: [{ id: tagId }, tagVisibleTo(principal)] } });
  if (!row) throw notFound('tag');
  return row;
}

export async function createTag(ctx: AppContext, principal: Principal, input: TagCreate): Promise<TagRow> {
  try {
    const created = await withinQuota(ctx, principal, 'tags', async (tx) => {
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
    announceEvents(ctx);
    return created;
  } catch (error) {
    if (isUniqueViolation(error)) throw tagNameTaken(input.name);
    throw error;
  }
}

/**
 * Locks a tag's row until the transaction ends (`forDelete`: against links too, else against other
 * writers only), then reads it as the caller may see it.
 */
async function lockVisibleTag(tx: Prisma.TransactionClient, principal: Principal, tagId: string, { forDelete }: { forDelete: boolean }): Promise<TagRow> {
  if (forDelete) await tx.$queryRaw`SELECT id FROM tags WHERE id = ${tagId}::uuid FOR UPDATE`;
  else await tx.$queryRaw`SELECT id FROM tags WHERE id = ${tagId}::uuid FOR NO KEY UPDATE`;
  const row = await tx.tag.findFirst({ where: { AND: [{ id: tagId }, tagVisibleTo(principal)] } });
  if (!row) throw notFound('tag');
  return row;
}

/** Renames and recolours under the tag's lock, writing only what was sent: concurrent changes all stay. */
export async function updateTag(ctx: AppContext, principal: Principal, tagId: string, change: TagPatch): Promise<TagRow> {
  try {
    return await recordingEvents(ctx, async (tx) => {
      const tag = await lockVisibleTag(tx, principal, tagId, { forDelete: false });
      const name = change.name ?? tag.name;
      const color = change.color?.toLowerCase() ?? tag.color;
      if (name === tag.name && color === tag.color) return tag;
      // The tasks carrying the tag show its name and colour.
      const touched = await touchTasks(tx, { tags: { some: { tagId: tag.id } } });
      const updated = await tx.tag.update({
        where: { id: tag.id },
        data: { ...(change.name !== undefined && { name, nameKey: nameKeyOf(name) }), ...(change.color !== undefined && { color }) },
      });
      await recordTaskUpdates(tx, principal.userId, touched, [tagChanged('tag.updated', updated)]);
      return updated;
    });
  } catch (error) {
    if (isUniqueViolation(error) && change.name !== undefined) throw tagNameTaken(change.name);
    throw error;
  }
}

/** Deletes a tag; every task that carried it changes its tag set, so it gets a new version. */
export async function deleteTag(ctx: AppContext, principal: Principal, tagId: string): Promise<void> {
  await recordingEvents(ctx, async (tx) => {
    // Links are inserted under a key-share lock on the tag, so once this holds, the set of tasks is final.
    const tag = await lockVisibleTag(tx, principal, tagId, { forDelete: true });
    const touched = await touchTasks(tx, { tags: { some: { tagId: tag.id } } });
    await tx.tag.delete({ where: { id: tag.id } });
    await recordTaskUpdates(tx, principal.userId, touched, [tagDeleted(tag)]);
  });
}
