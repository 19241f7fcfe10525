import type { Member, Project } from '@task-service/client';
import { sql, type InferResult, type Selection } from 'kysely';
import { tables, type DB } from '../db/query.js';
import { iso } from '../tasks/change-events.js';

/**
 * The projects as a viewer sees them: `role` is the viewer's (null when they are not a member),
 * `memberCount` counted on project_members' (project_id, added_at, user_id) index.
 */
export const projectsSeenBy = (viewerId: string) =>
  tables.selectFrom('projects').select((eb) => [
    'projects.id',
    'projects.name',
    'projects.description',
    'projects.version',
    'projects.created_at as createdAt',
    'projects.updated_at as updatedAt',
    eb
      .selectFrom('project_members as viewer')
      .select('viewer.role')
      .whereRef('viewer.project_id', '=', 'projects.id')
      .where('viewer.user_id', '=', viewerId)
      .as('role'),
    eb
      .selectFrom('project_members as counted')
      .select(sql<number>`count(*)::int`.as('n'))
      .whereRef('counted.project_id', '=', 'projects.id')
      .as('memberCount'),
  ]);

export type ProjectRow = InferResult<ReturnType<typeof projectsSeenBy>>[number];

export function serializeProject(row: ProjectRow): Project {
  return {
    id: row.id,
    name: row.name,
    description: row.description,
    role: row.role,
    memberCount: row.memberCount ?? 0,
    version: row.version,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

/** The columns a Member is made of: a membership joined with its user. */
export const memberColumns = [
  'project_members.user_id as userId',
  'users.name',
  'users.email',
  'project_members.role',
  'project_members.added_at as addedAt',
] as const;

export type MemberRow = Selection<DB, 'project_members' | 'users', (typeof memberColumns)[number]>;

/** The members of projects with their users, for every query that shows members. */
export const membersWithUsers = () =>
  tables.selectFrom('project_members').innerJoin('users', 'users.id', 'project_members.user_id').select(memberColumns);

export function serializeMember(row: MemberRow): Member {
  return { userId: row.userId, name: row.name, email: row.email, role: row.role, addedAt: row.addedAt.toISOString() };
}

/**
 * The contract's Project of the row `p` as jsonb, for events written in SQL (serializeProject's
 * shape): `role` is null, as an event goes to every member; `memberCount` is the SQL given.
 */
export const projectJson = (p: string, memberCount: string): string =>
  `jsonb_build_object('id', ${p}.id, 'name', ${p}.name, 'description', ${p}.description, 'role', NULL,
     'memberCount', ${memberCount}, 'version', ${p}.version, 'createdAt', ${iso(`${p}.created_at`)}, 'updatedAt', ${iso(`${p}.updated_at`)})`;

/** The contract's Member of the membership `m` and its user `u` as jsonb (serializeMember's shape). */
export const memberJson = (m: string, u: string): string =>
  `jsonb_build_object('userId', ${m}.user_id, 'name', ${u}.name, 'email', ${u}.email, 'role', ${m}.role, 'addedAt', ${iso(`${m}.added_at`)})`;
