import { z } from 'zod';
import {
  c,
  commonErrors,
  EmailSchema,
  IdSchema,
  PaginationQuerySchema,
  PasswordSchema,
  PersonNameSchema,
  pageOf,
  ProblemSchema,
  SearchSchema,
  TimestampSchema,
  type Alias,
} from './common.js';
import { needs } from './scopes.js';
import { TaskListQuerySchema, TaskSchema } from './tasks.js';

export const RoleSchema = z
  .enum(['user', 'admin'])
  .describe('`admin` may see and change everything; `user` only their own account, tasks and tags');
export type Role = z.infer<typeof RoleSchema>;

const userSchema = z.object({
  id: IdSchema.describe("The user's id (UUIDv7)"),
  email: z.string().describe('Lower-case; unique ignoring case'),
  name: z.string().describe('The display name'),
  role: RoleSchema,
  createdAt: TimestampSchema.describe('When the account was created'),
  updatedAt: TimestampSchema.describe('When the profile (email, name, password or role) last changed'),
});
export interface User extends z.output<typeof userSchema> {}
/** The schema's own type, by name (it keeps `.extend` and `.strict`). */
export interface UserSchemaType extends Alias<typeof userSchema> {}
export const UserSchema: UserSchemaType = userSchema;

const userCreateSchema = z
  .object({
    email: EmailSchema,
    password: PasswordSchema,
    name: PersonNameSchema,
    role: RoleSchema.optional().describe('Default `user`'),
  })
  .strict();
export interface UserCreate extends z.output<typeof userCreateSchema> {}
export interface UserCreateInput extends z.input<typeof userCreateSchema> {}
export const UserCreateSchema: z.ZodType<UserCreate, z.ZodTypeDef, UserCreateInput> = userCreateSchema;

/** Full replacement of the editable profile; `role` is honoured for admins only (403 otherwise). */
const userReplaceSchema = z
  .object({
    email: EmailSchema,
    name: PersonNameSchema,
    role: RoleSchema.optional().describe(
      'Administrators only (403 for others); omitted keeps the role. Leaving no administrator is 409 last_admin',
    ),
  })
  .strict();
export interface UserReplace extends z.output<typeof userReplaceSchema> {}
export interface UserReplaceInput extends z.input<typeof userReplaceSchema> {}
export const UserReplaceSchema: z.ZodType<UserReplace, z.ZodTypeDef, UserReplaceInput> = userReplaceSchema;

const userPatchSchema = z
  .object({
    email: EmailSchema.optional(),
    name: PersonNameSchema.optional(),
    password: PasswordSchema.optional().describe(
      'The new password, 8 to 128 characters; changing your own ends your other sessions',
    ),
    currentPassword: z
      .string()
      .max(128)
      .optional()
      .describe(
        "Required when users change their own password (an administrator changing someone else's does not send it); wrong guesses are throttled like failed logins (429)",
      ),
    role: RoleSchema.optional().describe(
      'Administrators only (403 for others); leaving no administrator is 409 last_admin',
    ),
  })
  .strict();
export interface UserPatch extends z.output<typeof userPatchSchema> {}
export interface UserPatchInput extends z.input<typeof userPatchSchema> {}
export const UserPatchSchema: z.ZodType<UserPatch, z.ZodTypeDef, UserPatchInput> = userPatchSchema;

const userListQuerySchema = PaginationQuerySchema.extend({
  q: SearchSchema(200)
    .optional()
    .describe('Users whose email or name contains this, ignoring case (1 to 200 characters)'),
  role: RoleSchema.optional().describe('Only users with this role'),
}).strict();
export interface UserListQuery extends z.output<typeof userListQuerySchema> {}
export interface UserListQueryInput extends z.input<typeof userListQuerySchema> {}
export const UserListQuerySchema: z.ZodType<UserListQuery, z.ZodTypeDef, UserListQueryInput> = userListQuerySchema;

export const UserTasksQuerySchema = TaskListQuerySchema.extend({
  relation: z
    .enum(['owner', 'assignee', 'any'])
    .default('any')
    .describe('Tasks the user owns (`owner`), is assigned (`assignee`), or either (`any`)'),
}).strict();

const UserParams = z.object({
  user_id: IdSchema.describe("The user's id; your own, or anyone's for an administrator (404 otherwise)"),
});

export const usersContract = c.router(
  {
    list: {
      method: 'GET',
      metadata: needs('admin'),
      path: '/users',
      query: UserListQuerySchema,
      responses: { 200: pageOf(UserSchema), 403: ProblemSchema },
      summary: 'List users (admin), oldest first',
      description:
        'Every user, oldest first, keyset-paginated; `q` searches name and email, `role` filters. Administrators only (403 for others).',
    },
    get: {
      method: 'GET',
      metadata: needs('account:read'),
      path: '/users/:user_id',
      pathParams: UserParams,
      responses: { 200: UserSchema, 404: ProblemSchema },
      summary: 'Get a user (self or admin)',
      description: "A user's profile: yourself, or anyone for an administrator (404 for someone else's id otherwise).",
    },
    listTasks: {
      method: 'GET',
      metadata: needs('tasks:read'),
      path: '/users/:user_id/tasks',
      pathParams: UserParams,
      query: UserTasksQuerySchema,
      responses: { 200: pageOf(TaskSchema), 404: ProblemSchema },
      summary: 'Tasks a user owns or is assigned to (self or admin)',
      description:
        'The tasks a user owns (`relation=owner`), is assigned (`assignee`) or either (`any`, the default), with the same filters and sorts as GET /tasks.',
    },
    create: {
      method: 'POST',
      metadata: needs('admin'),
      path: '/users',
      body: UserCreateSchema,
      responses: { 201: UserSchema, 403: ProblemSchema, 409: ProblemSchema },
      summary: 'Create a user (admin)',
      description:
        'Creates an account with a password and an optional role. Administrators only (403); 409 email_taken for an email already registered.',
    },
    replace: {
      method: 'PUT',
      metadata: needs('account:write'),
      path: '/users/:user_id',
      pathParams: UserParams,
      body: UserReplaceSchema,
      responses: { 200: UserSchema, 403: ProblemSchema, 404: ProblemSchema, 409: ProblemSchema },
      summary: 'Replace a user profile (self or admin)',
      description:
        'Replaces the editable profile (email, name; role for administrators only: 403 otherwise). 409 email_taken when the email belongs to someone else; 409 last_admin when it would leave no administrator.',
    },
    update: {
      method: 'PATCH',
      metadata: needs('account:write'),
      path: '/users/:user_id',
      pathParams: UserParams,
      body: UserPatchSchema,
      responses: { 200: UserSchema, 403: ProblemSchema, 404: ProblemSchema, 409: ProblemSchema },
      summary: 'Update a user (self or admin)',
      description:
        'Changes some of email, name, password (with currentPassword when it is your own; changing it ends your other sessions) and role (administrators only). 409 as for PUT.',
    },
    remove: {
      method: 'DELETE',
      metadata: needs('account:write'),
      path: '/users/:user_id',
      pathParams: UserParams,
      body: c.noBody(),
      responses: { 204: c.noBody(), 404: ProblemSchema, 409: ProblemSchema },
      summary: 'Delete a user with their tasks, tags, attachments and sessions (self or admin)',
      description:
        'Deletes the account with its tasks, tags, attachments and sessions; tasks of others assigned to it become unassigned. 409 last_admin for the last administrator.',
    },
  },
  { commonResponses: commonErrors },
);
