import type { Member, Project, ProjectCreate, ProjectListQuery, ProjectPatch } from '@task-service/client';
import type { MemberAdd, MemberListQuery, MemberPatch } from '@task-service/client';
import type { AppContext } from '../context.js';
import { announceEvents } from '../events/signal.js';
import { AppError, notFound } from '../http/errors.js';
import { entityTag } from '../http/etags.js';
import {
  createdAfterId,
  creationCursor,
  toPage,
  type Cursor,
  type ListExchange,
  type Page,
} from '../http/pagination.js';
import type { Principal } from '../http/principal.js';
import { quotaClaims, quotaExceeded } from '../quotas.js';
import { discardStoredBytes } from '../storage/stored-bytes.js';
import { deleteMember, insertMember, updateMember } from './members-store.js';
import { projectsListed, projectVisibleTo } from './queries.js';
import {
  membersWithUsers,
  projectsSeenBy,
  serializeMember,
  serializeProject,
  type MemberRow,
  type ProjectRow,
} from './serialize.js';
import { insertProject, removeProject, updateProject } from './store.js';

const onlyProjectAdmins = (what: string) =>
  new AppError('forbidden', `Only an admin of the project (or an administrator) may ${what}`);

const staleVersion = (version: number) =>
  new AppError('precondition_failed', `The project is at version ${version}`, {
    headers: { ETag: entityTag(version) },
  });

const lastProjectAdmin = () =>
  new AppError('last_project_admin', 'A project keeps at least one admin: make another member an admin first');

/** Oldest first. */
export async function listProjects(
  ctx: AppContext,
  principal: Principal,
  query: ProjectListQuery,
  http: ListExchange,
): Promise<Page<Project>> {
  const rows = await ctx.db.sql.all(projectsListed(principal, query, createdAfterId(ctx.cursors, query.cursor)));
  return toPage(ctx.cursors, http, rows, query.limit, creationCursor, serializeProject);
}

/** A project the caller belongs to (any for an admin), or 404. */
export async function findVisibleProject(
  ctx: AppContext,
  principal: Principal,
  projectId: string,
): Promise<ProjectRow> {
  const row = await ctx.db.sql.first(
    projectsSeenBy(principal.userId).where('projects.id', '=', projectId).where(projectVisibleTo(principal)),
  );
  if (!row) throw notFound('project');
  return row;
}

/** One round trip (store.ts), tried far from the quota's limit first, then with the user's row held exclusively. */
export async function createProject(ctx: AppContext, principal: Principal, input: ProjectCreate): Promise<ProjectRow> {
  const now = new Date();
  for (const claim of await quotaClaims(ctx, principal, 'projects')) {
    const outcome = await insertProject(ctx, principal, input, claim, now);
    if (outcome.kind === 'created') {
      announceEvents(ctx);
      return outcome.row;
    }
  }
  throw quotaExceeded('projects', ctx.config.quotas.projects);
}

export async function changeProject(
  ctx: AppContext,
  principal: Principal,
  projectId: string,
  ifMatch: string | undefined,
  change: ProjectPatch,
): Promise<ProjectRow> {
  const outcome = await updateProject(ctx, principal, projectId, ifMatch, change, new Date());
  switch (outcome.kind) {
    case 'not_found':
      throw notFound('project');
    case 'forbidden':
      throw onlyProjectAdmins('change the project');
    case 'stale':
      throw staleVersion(outcome.version);
    case 'changed':
      announceEvents(ctx);
      return outcome.row;
    case 'unchanged':
      return outcome.row;
  }
}

/** Deletes the project with its tasks, tags and memberships, then the bytes of its attachments. */
export async function deleteProject(
  ctx: AppContext,
  principal: Principal,
  projectId: string,
  ifMatch: string | undefined,
): Promise<void> {
  const outcome = await removeProject(ctx, principal, projectId, ifMatch);
  switch (outcome.kind) {
    case 'not_found':
      throw notFound('project');
    case 'forbidden':
      throw onlyProjectAdmins('delete the project');
    case 'stale':
      throw staleVersion(outcome.version);
    case 'deleted':
      announceEvents(ctx);
      await discardStoredBytes(ctx, outcome.storageKeys);
  }
}

/** Members in the order they joined (added_at, then user id), on project_members' (project_id, added_at, user_id) index. */
const JOIN_ORDER = 'addedAt';
const joinCursor = (row: MemberRow): Cursor => ({ s: JOIN_ORDER, v: row.addedAt.toISOString(), id: row.userId });

export async function listMembers(
  ctx: AppContext,
  principal: Principal,
  projectId: string,
  query: MemberListQuery,
  http: ListExchange,
): Promise<Page<Member>> {
  const project = await findVisibleProject(ctx, principal, projectId);
  const after = ctx.cursors.decode(query.cursor, JOIN_ORDER);
  let members = membersWithUsers().where('project_members.project_id', '=', project.id);
  if (after && typeof after.v === 'string') {
    const [addedAt, userId] = [new Date(after.v), after.id];
    members = members.where((eb) =>
      eb(eb.refTuple('project_members.added_at', 'project_members.user_id'), '>', eb.tuple(addedAt, userId)),
    );
  }
  const rows = await ctx.db.sql.all(
    members
      .orderBy('project_members.added_at')
      .orderBy('project_members.user_id')
      .limit(query.limit + 1),
  );
  return toPage(ctx.cursors, http, rows, query.limit, joinCursor, serializeMember);
}

export async function addMember(
  ctx: AppContext,
  principal: Principal,
  projectId: string,
  body: MemberAdd,
): Promise<MemberRow> {
  const outcome = await insertMember(
    ctx,
    principal,
    projectId,
    { userId: body.userId, email: body.email },
    body.role,
    ctx.config.projectMaxMembers,
    new Date(),
  );
  switch (outcome.kind) {
    case 'not_found':
      throw notFound('project');
    case 'forbidden':
      throw onlyProjectAdmins('add members');
    case 'no_user':
      throw notFound('user');
    case 'already_member':
      throw new AppError('already_member', 'This user is already a member of the project');
    case 'full':
      throw new AppError(
        'quota_exceeded',
        `Quota "projectMembers" reached: a project has at most ${ctx.config.projectMaxMembers} members (PROJECT_MAX_MEMBERS)`,
      );
    case 'added':
      announceEvents(ctx);
      return outcome.row;
  }
}

export async function changeMember(
  ctx: AppContext,
  principal: Principal,
  projectId: string,
  userId: string,
  body: MemberPatch,
): Promise<MemberRow> {
  const outcome = await updateMember(ctx, principal, projectId, userId, body.role);
  switch (outcome.kind) {
    case 'not_found':
      throw notFound('project');
    case 'forbidden':
      throw onlyProjectAdmins("change a member's role");
    case 'no_member':
      throw notFound('member');
    case 'last_admin':
      throw lastProjectAdmin();
    case 'changed':
      announceEvents(ctx);
      return outcome.row;
    case 'unchanged':
      return outcome.row;
  }
}

/** A project admin removes anyone; any member may leave. */
export async function removeMember(
  ctx: AppContext,
  principal: Principal,
  projectId: string,
  userId: string,
): Promise<void> {
  const outcome = await deleteMember(ctx, principal, projectId, userId);
  switch (outcome) {
    case 'not_found':
      throw notFound('project');
    case 'forbidden':
      throw onlyProjectAdmins('remove another member');
    case 'no_member':
      throw notFound('member');
    case 'last_admin':
      throw lastProjectAdmin();
    case 'removed':
      announceEvents(ctx);
  }
}
