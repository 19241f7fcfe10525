import type { Tag, TagCreate, TagListQuery, TagPatch } from '@task-service/client';
import type { AppContext } from '../context.js';
import { isUniqueViolation } from '../db/errors.js';
import { tables } from '../db/query.js';
import { announceEvents } from '../events/signal.js';
import { quotaClaims, quotaExceeded } from '../quotas.js';
import { AppError, invalidField, notFound } from '../http/errors.js';
import { createdAfterId, creationCursor, toPage, type ListExchange, type Page } from '../http/pagination.js';
import type { Principal } from '../http/principal.js';
import { defaultColorFor, nameKeyOf, tagsListed, tagVisibleTo } from './queries.js';
import { serializeTag, tagColumns, type TagRow } from './serialize.js';
import { insertTag, removeTag, updateTag } from './store.js';

const tagNameTaken = (name: string) =>
  new AppError(
    'tag_name_taken',
    `A tag named "${name}" already exists among your tags, or the project's (names ignore case)`,
  );

const readOnlyTag = () =>
  new AppError('forbidden', "Only an editor or admin of the tag's project may change or delete it");

/** Oldest first. */
export async function listTags(
  ctx: AppContext,
  principal: Principal,
  query: TagListQuery,
  http: ListExchange,
): Promise<Page<Tag>> {
  const after = createdAfterId(ctx.cursors, query.cursor);
  const rows = await ctx.db.sql.all(tagsListed(principal, query, after));
  return toPage(ctx.cursors, http, rows, query.limit, creationCursor, serializeTag);
}

/** A tag the caller may see (their own; any for an admin), or 404. */
export async function findVisibleTag(ctx: AppContext, principal: Principal, tagId: string): Promise<TagRow> {
  const row = await ctx.db.sql.first(
    tables.selectFrom('tags').select(tagColumns).where('tags.id', '=', tagId).where(tagVisibleTo(principal)),
  );
  if (!row) throw notFound('tag');
  return row;
}

/** One round trip (store.ts), tried far from the quota's limit first, then with the user's row held exclusively. */
export async function createTag(ctx: AppContext, principal: Principal, input: TagCreate): Promise<TagRow> {
  const tag = {
    name: input.name,
    nameKey: nameKeyOf(input.name),
    color: (input.color ?? defaultColorFor(input.name)).toLowerCase(),
    projectId: input.projectId,
  };
  const now = new Date();
  try {
    for (const claim of await quotaClaims(ctx, principal, 'tags')) {
      const outcome = await insertTag(ctx, principal, tag, claim, now);
      if (outcome.kind === 'unknown_project')
        throw invalidField(
          'body.projectId',
          'unknown_project',
          'No project of yours where you are an editor or admin has this id',
        );
      if (outcome.kind === 'created') {
        announceEvents(ctx);
        return outcome.row;
      }
    }
  } catch (error) {
    if (isUniqueViolation(error)) throw tagNameTaken(input.name);
    throw error;
  }
  throw quotaExceeded('tags', ctx.config.quotas.tags);
}

/** Renames and recolours under the tag's lock, writing only what was sent: concurrent changes all stay. */
export async function changeTag(
  ctx: AppContext,
  principal: Principal,
  tagId: string,
  change: TagPatch,
): Promise<TagRow> {
  const outcome = await updateTag(ctx, principal, tagId, {
    ...(change.name !== undefined && { name: change.name, nameKey: nameKeyOf(change.name) }),
    ...(change.color !== undefined && { color: change.color.toLowerCase() }),
  }).catch((error: unknown) => {
    throw isUniqueViolation(error) && change.name !== undefined ? tagNameTaken(change.name) : error;
  });
  switch (outcome.kind) {
    case 'not_found':
      throw notFound('tag');
    case 'forbidden':
      throw readOnlyTag();
    case 'changed':
      announceEvents(ctx);
      return outcome.row;
    case 'unchanged':
      return outcome.row;
  }
}

/** Deletes a tag; every task that carried it changes its tag set, so it gets a new version. */
export async function deleteTag(ctx: AppContext, principal: Principal, tagId: string): Promise<void> {
  const outcome = await removeTag(ctx, principal, tagId);
  if (outcome === 'not_found') throw notFound('tag');
  if (outcome === 'forbidden') throw readOnlyTag();
  announceEvents(ctx);
}
