import type { ProjectListQuery } from '@task-service/client';
import type { ExpressionBuilder } from 'kysely';
import { tables, type DB } from '../db/query.js';
import { containsPattern } from '../db/search.js';
import { isAdmin, type Principal } from '../http/principal.js';
import { projectsSeenBy } from './serialize.js';

/**
 * Whether `userId` is a member of the project in scope: one probe of project_members' primary key
 * (project_id, user_id).
 */
export const hasMember = (userId: string) => (eb: ExpressionBuilder<DB, 'projects'>) =>
  eb.exists(
    eb
      .selectFrom('project_members as member')
      .select('member.user_id')
      .whereRef('member.project_id', '=', 'projects.id')
      .where('member.user_id', '=', userId),
  );

/** Admins see every project, others those they belong to. */
export const projectVisibleTo = (principal: Principal) => (eb: ExpressionBuilder<DB, 'projects'>) =>
  isAdmin(principal) ? eb.lit(true) : hasMember(principal.userId)(eb);

/**
 * A page of GET /projects in id (creation) order, `limit + 1` rows. A member's projects are picked
 * along project_members' (user_id, project_id) index, every project (an admin's list) along the
 * primary key: either way page 1,000 costs what page 1 does. A non-admin naming another user sees
 * the projects both belong to.
 */
export function projectsListed(principal: Principal, query: ProjectListQuery, after: string | undefined) {
  const memberOf = query.userId ?? (isAdmin(principal) ? undefined : principal.userId);
  const pageSize = query.limit + 1;
  const seen = projectsSeenBy(principal.userId);
  if (memberOf === undefined) {
    let all = seen;
    if (after !== undefined) all = all.where('projects.id', '>', after);
    if (query.q) all = all.where('projects.name', 'ilike', containsPattern(query.q));
    return all.orderBy('projects.id').limit(pageSize);
  }
  let picked = tables
    .selectFrom('project_members as listing')
    .select('listing.project_id')
    .where('listing.user_id', '=', memberOf);
  if (after !== undefined) picked = picked.where('listing.project_id', '>', after);
  const { q } = query;
  if (q) {
    picked = picked.where((eb) =>
      eb.exists(
        eb
          .selectFrom('projects as named')
          .select('named.id')
          .whereRef('named.id', '=', 'listing.project_id')
          .where('named.name', 'ilike', containsPattern(q)),
      ),
    );
  }
  if (memberOf !== principal.userId && !isAdmin(principal)) {
    picked = picked.where((eb) =>
      eb.exists(
        eb
          .selectFrom('project_members as mine')
          .select('mine.user_id')
          .whereRef('mine.project_id', '=', 'listing.project_id')
          .where('mine.user_id', '=', principal.userId),
      ),
    );
  }
  return seen
    .where('projects.id', 'in', picked.orderBy('listing.project_id').limit(pageSize))
    .orderBy('projects.id')
    .limit(pageSize);
}
