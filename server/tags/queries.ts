import { createHash } from 'node:crypto';
import type { TagListQuery } from '@task-service/client';
import { sql, type ExpressionBuilder, type SelectQueryBuilder, type SqlBool } from 'kysely';
import { tables, type DB } from '../db/query.js';
import { containsPattern } from '../db/search.js';
import { isAdmin, type Principal } from '../http/principal.js';
import { tagColumns, type TagRow } from './serialize.js';

/**
 * The role of `userId` in the project of the row `tags` (NULL for a personal tag or a non-member):
 * one probe of project_members' primary key, on the membership as it is now.
 */
const projectRoleOf = (userId: string) =>
  sql<
    'viewer' | 'editor' | 'admin' | null
  >`(SELECT pm.role FROM project_members pm WHERE pm.project_id = tags.project_id AND pm.user_id = ${userId}::uuid)`;

/** Admins see every tag, others their personal tags and their projects' tags. */
export const tagVisibleTo = (principal: Principal) => (eb: ExpressionBuilder<DB, 'tags'>) =>
  isAdmin(principal)
    ? eb.lit(true)
    : eb.or([
        eb.and([eb('tags.project_id', 'is', null), eb('tags.owner_id', '=', principal.userId)]),
        sql<SqlBool>`(${projectRoleOf(principal.userId)} IS NOT NULL)`,
      ]);

/** Who may change or delete a tag they see: its owner (a personal tag), an editor or admin of its project, an admin. */
export const tagWritableBy = (principal: Principal) => (eb: ExpressionBuilder<DB, 'tags'>) =>
  isAdmin(principal)
    ? eb.lit(true)
    : eb.or([
        eb.and([eb('tags.project_id', 'is', null), eb('tags.owner_id', '=', principal.userId)]),
        sql<SqlBool>`(${projectRoleOf(principal.userId)} IN ('editor', 'admin'))`,
      ]);

/** The filters of GET /tags. */
export function filterTags<O>(
  tags: SelectQueryBuilder<DB, 'tags', O>,
  query: TagListQuery,
): SelectQueryBuilder<DB, 'tags', O> {
  let filtered = tags;
  if (query.ownerId) filtered = filtered.where('tags.owner_id', '=', query.ownerId);
  if (query.projectId === 'none') filtered = filtered.where('tags.project_id', 'is', null);
  else if (query.projectId) filtered = filtered.where('tags.project_id', '=', query.projectId);
  if (query.q) filtered = filtered.where('tags.name', 'ilike', containsPattern(query.q));
  return filtered;
}

/**
 * A page of GET /tags in id (creation) order, `limit + 1` rows after the tag `after`. A non-admin's
 * is two pages merged, each along its own index: their personal tags, and their projects' tags
 * (the projects from their memberships), rather than every tag filtered by who may see it.
 */
export function tagsListed(principal: Principal, query: TagListQuery, after: string | undefined) {
  const from = after ? tables.selectFrom('tags').where('tags.id', '>', after) : tables.selectFrom('tags');
  const pageOf = (tags: typeof from) =>
    filterTags(tags.select(tagColumns), query)
      .orderBy('tags.id')
      .limit(query.limit + 1);
  if (isAdmin(principal)) return pageOf(from);
  const me = principal.userId;
  const personal = pageOf(from.where('tags.owner_id', '=', me).where('tags.project_id', 'is', null));
  const ofProjects = pageOf(
    from.where(
      'tags.project_id',
      'in',
      tables
        .selectFrom('project_members')
        .select('project_members.project_id')
        .where('project_members.user_id', '=', me),
    ),
  );
  return tables
    .selectFrom(sql<TagRow>`(${personal} UNION ALL ${ofProjects})`.as('visible'))
    .selectAll()
    .orderBy('visible.id')
    .limit(query.limit + 1);
}

/** The key that makes tag names unique per owner regardless of case. */
export const nameKeyOf = (name: string): string => name.toLowerCase();

const PALETTE = [
  '#e53935',
  '#d81b60',
  '#8e24aa',
  '#5e35b1',
  '#3949ab',
  '#1e88e5',
  '#00897b',
  '#43a047',
  '#7cb342',
  '#fdd835',
  '#fb8c00',
  '#6d4c41',
];

/** A colour for a tag created without one: the same name always gets the same colour. */
export function defaultColorFor(name: string): string {
  const digest = createHash('sha256').update(nameKeyOf(name)).digest();
  return PALETTE[digest.readUInt32BE(0) % PALETTE.length] ?? '#757575';
}
