import { z } from 'zod';
import {
  c,
  commonErrors,
  EmailSchema,
  IdSchema,
  IfMatchHeaders,
  PaginationQuerySchema,
  pageOf,
  ProblemSchema,
  SearchSchema,
  storableText,
  TimestampSchema,
  type Named,
} from './common.js';
import { needs } from './scopes.js';

export const ProjectRoleSchema = z
  .enum(['viewer', 'editor', 'admin'])
  .describe(
    '`viewer` reads the project and its work, `editor` also changes its tasks and tags, `admin` also renames or deletes the project and manages its members',
  );
export type ProjectRole = z.infer<typeof ProjectRoleSchema>;

const projectSchema = z.object({
  id: IdSchema.describe("The project's id (UUIDv7)"),
  name: z.string().describe('1 to 100 characters'),
  description: z.string().describe('Up to 10,000 characters; empty when none'),
  role: ProjectRoleSchema.nullable().describe(
    "The caller's role in the project; null for an administrator who is not a member, and in events (each receiver has their own)",
  ),
  memberCount: z.number().int().describe('How many members the project has'),
  version: z
    .number()
    .int()
    .describe('Starts at 1 and grows by one with every change of name or description; the ETag is `"<version>"`'),
  createdAt: TimestampSchema.describe('When the project was created'),
  updatedAt: TimestampSchema.describe('When its name or description last changed'),
});
export interface Project extends z.output<typeof projectSchema> {}
export const ProjectSchema: Named<Project> = projectSchema;

const memberSchema = z.object({
  userId: IdSchema.describe('The member'),
  name: z.string().describe("The member's display name"),
  email: z.string().describe("The member's email"),
  role: ProjectRoleSchema,
  addedAt: TimestampSchema.describe('When the user became a member'),
});
export interface Member extends z.output<typeof memberSchema> {}
export const MemberSchema: Named<Member> = memberSchema;

const ProjectNameSchema = storableText(z.string().trim().min(1).max(100)).describe(
  '1 to 100 characters after trimming',
);
const ProjectDescriptionSchema = storableText(z.string().max(10_000)).describe('Up to 10,000 characters');

const projectCreateSchema = z
  .object({ name: ProjectNameSchema, description: ProjectDescriptionSchema.default('') })
  .strict();
export interface ProjectCreate extends z.output<typeof projectCreateSchema> {}
export interface ProjectCreateInput extends z.input<typeof projectCreateSchema> {}
export const ProjectCreateSchema: z.ZodType<ProjectCreate, z.ZodTypeDef, ProjectCreateInput> = projectCreateSchema;

const projectPatchSchema = z
  .object({ name: ProjectNameSchema.optional(), description: ProjectDescriptionSchema.optional() })
  .strict();
export interface ProjectPatch extends z.output<typeof projectPatchSchema> {}
export interface ProjectPatchInput extends z.input<typeof projectPatchSchema> {}
export const ProjectPatchSchema: z.ZodType<ProjectPatch, z.ZodTypeDef, ProjectPatchInput> = projectPatchSchema;

const projectListQuerySchema = PaginationQuerySchema.extend({
  q: SearchSchema(100).optional().describe('Projects whose name contains this, ignoring case (1 to 100 characters)'),
  userId: IdSchema.optional().describe(
    'The projects this user belongs to; useful to administrators, as others see only their own projects',
  ),
}).strict();
export interface ProjectListQuery extends z.output<typeof projectListQuerySchema> {}
export interface ProjectListQueryInput extends z.input<typeof projectListQuerySchema> {}
export const ProjectListQuerySchema: z.ZodType<ProjectListQuery, z.ZodTypeDef, ProjectListQueryInput> =
  projectListQuerySchema;

const memberListQuerySchema = PaginationQuerySchema.strict();
export interface MemberListQuery extends z.output<typeof memberListQuerySchema> {}
export interface MemberListQueryInput extends z.input<typeof memberListQuerySchema> {}
export const MemberListQuerySchema: z.ZodType<MemberListQuery, z.ZodTypeDef, MemberListQueryInput> =
  memberListQuerySchema;

const memberAddSchema = z
  .object({
    userId: IdSchema.optional().describe('The user to add (or give `email`)'),
    email: EmailSchema.optional().describe('The email of the user to add (or give `userId`)'),
    role: ProjectRoleSchema,
  })
  .strict()
  .refine((body) => (body.userId === undefined) !== (body.email === undefined), {
    message: 'Give exactly one of userId and email',
    path: ['userId'],
  });
export interface MemberAdd extends z.output<typeof memberAddSchema> {}
export interface MemberAddInput extends z.input<typeof memberAddSchema> {}
export const MemberAddSchema: z.ZodType<MemberAdd, z.ZodTypeDef, MemberAddInput> = memberAddSchema;

const memberPatchSchema = z.object({ role: ProjectRoleSchema }).strict();
export interface MemberPatch extends z.output<typeof memberPatchSchema> {}
export interface MemberPatchInput extends z.input<typeof memberPatchSchema> {}
export const MemberPatchSchema: z.ZodType<MemberPatch, z.ZodTypeDef, MemberPatchInput> = memberPatchSchema;

const ProjectIdSchema = IdSchema.describe('A project you belong to (any for an administrator); another is 404');
const ProjectParams = z.object({ project_id: ProjectIdSchema });
const MemberParams = z.object({
  project_id: ProjectIdSchema,
  user_id: IdSchema.describe('A member of the project; anyone else is 404'),
});

export const projectsContract = c.router(
  {
    list: {
      method: 'GET',
      metadata: needs('projects:read'),
      path: '/projects',
      query: ProjectListQuerySchema,
      responses: { 200: pageOf(ProjectSchema) },
      summary: "List the caller's projects (admin: all), oldest first",
      description:
        "The projects the caller belongs to (administrators: every project, or one user's with userId), oldest first, keyset-paginated; `q` searches names.",
    },
    create: {
      method: 'POST',
      metadata: needs('projects:write'),
      path: '/projects',
      body: ProjectCreateSchema,
      responses: { 201: ProjectSchema, 409: ProblemSchema },
      summary: 'Create a project (the caller is its first admin)',
      description:
        'Creates a project with the caller as its only member, an admin. Each user creates at most USER_MAX_PROJECTS projects (409 `quota_exceeded`; administrators exempt).',
    },
    get: {
      method: 'GET',
      metadata: needs('projects:read'),
      path: '/projects/:project_id',
      pathParams: ProjectParams,
      responses: { 200: ProjectSchema, 404: ProblemSchema },
      summary: 'Get a project',
      description: 'A project the caller belongs to (any for an administrator). Sends `ETag: "<version>"`.',
    },
    update: {
      method: 'PATCH',
      metadata: needs('projects:write'),
      path: '/projects/:project_id',
      pathParams: ProjectParams,
      headers: IfMatchHeaders,
      body: ProjectPatchSchema,
      responses: { 200: ProjectSchema, 403: ProblemSchema, 404: ProblemSchema, 412: ProblemSchema },
      summary: 'Rename a project or change its description (project admin; honours If-Match)',
      description:
        'Changes the fields sent. Only a project admin (or an administrator); other members get 403. Send If-Match with the ETag you read: a project changed meanwhile answers 412 and is left as it is.',
    },
    remove: {
      method: 'DELETE',
      metadata: needs('projects:write'),
      path: '/projects/:project_id',
      pathParams: ProjectParams,
      headers: IfMatchHeaders,
      body: c.noBody(),
      responses: { 204: c.noBody(), 403: ProblemSchema, 404: ProblemSchema, 412: ProblemSchema },
      summary: 'Delete a project with its tasks, tags and members (project admin; honours If-Match)',
      description:
        'Deletes the project with its tasks (their attachments, bytes included), its tags and its memberships, as one change reported by one `project.deleted` event. Only a project admin (or an administrator). If-Match as for PATCH.',
    },
    listMembers: {
      method: 'GET',
      metadata: needs('projects:read'),
      path: '/projects/:project_id/members',
      pathParams: ProjectParams,
      query: MemberListQuerySchema,
      responses: { 200: pageOf(MemberSchema), 404: ProblemSchema },
      summary: "A project's members, in the order they joined",
      description: "The project's members, longest-standing first, keyset-paginated. Any member may list them.",
    },
    addMember: {
      method: 'POST',
      metadata: needs('projects:write'),
      path: '/projects/:project_id/members',
      pathParams: ProjectParams,
      body: MemberAddSchema,
      responses: { 201: MemberSchema, 403: ProblemSchema, 404: ProblemSchema, 409: ProblemSchema },
      summary: 'Add a member by userId or email (project admin)',
      description:
        'Adds a user, named by `userId` or `email`, with a role. Only a project admin (or an administrator); other members get 403. An unknown user is 404, one already a member 409 `already_member`; a project holds at most PROJECT_MAX_MEMBERS members (409 `quota_exceeded`).',
    },
    updateMember: {
      method: 'PATCH',
      metadata: needs('projects:write'),
      path: '/projects/:project_id/members/:user_id',
      pathParams: MemberParams,
      body: MemberPatchSchema,
      responses: { 200: MemberSchema, 403: ProblemSchema, 404: ProblemSchema, 409: ProblemSchema },
      summary: "Change a member's role (project admin)",
      description:
        "Changes a member's role. Only a project admin (or an administrator). Demoting the project's last admin is 409 `last_project_admin`.",
    },
    removeMember: {
      method: 'DELETE',
      metadata: needs('projects:write'),
      path: '/projects/:project_id/members/:user_id',
      pathParams: MemberParams,
      body: c.noBody(),
      responses: { 204: c.noBody(), 403: ProblemSchema, 404: ProblemSchema, 409: ProblemSchema },
      summary: 'Remove a member, or leave a project (project admin, or the member)',
      description:
        "Removes a member: a project admin (or an administrator) removes anyone, any member removes themself. Removing the project's last admin is 409 `last_project_admin`. The removed user loses the project's tasks and events at once.",
    },
  },
  { commonResponses: commonErrors },
);
