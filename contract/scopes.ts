// What a personal access token may do: one scope per operation, declared as the route's metadata
// (`metadata: needs('tasks:read')`) and enforced by the service's one authentication middleware.
import type { AppRoute } from '@ts-rest/core';
import { z } from 'zod';

export const SCOPES = [
  'tasks:read',
  'tasks:write',
  'projects:read',
  'projects:write',
  'tags:read',
  'tags:write',
  'webhooks:read',
  'webhooks:write',
  'events:read',
  'account:read',
  'account:write',
  'admin',
] as const;
export const ScopeSchema = z
  .enum(SCOPES)
  .describe(
    '`tasks:*` (tasks, their tag links, attachments, relations, comments and activity), `projects:*` (projects and their members), `tags:*`, `webhooks:*`, `events:read` (changes feed and live stream, showing the events of what the other scopes read), `account:*` (own profile, not the password, the email or deleting the account), `admin`; `write` implies `read`',
  );
export type Scope = z.infer<typeof ScopeSchema>;

/** What each scope allows, as the README and the docs page show it. */
export const scopeDescriptions: Record<Scope, string> = {
  'tasks:read': 'Read tasks, their tags, attachments, subtasks, relations, comments and activity',
  'tasks:write':
    'Create, change and delete tasks, their tag links, attachments, relations and comments (implies tasks:read)',
  'projects:read': 'Read projects and their members',
  'projects:write':
    'Create, rename and delete projects, and add, change and remove their members (implies projects:read)',
  'tags:read': 'Read tags',
  'tags:write': 'Create, rename, recolour and delete tags (implies tags:read)',
  'webhooks:read': 'Read webhooks and their delivery logs',
  'webhooks:write': 'Create, change, delete webhooks and retry deliveries (implies webhooks:read)',
  'events:read':
    'Read the changes feed (/changes) and the live stream (/events): the events of what the other scopes of the token read (task, attachment, relation and comment events with tasks:read, project events with projects:read, tag events with tags:read, account events with account:read)',
  'account:read': 'Read your own profile',
  'account:write':
    'Change your own profile, not the password or the email, and not delete the account: those need a login (implies account:read)',
  admin: "An administrator's powers (only an administrator may grant it; it works only while the owner is one)",
};

/**
 * The scope that lets a token read what an event of `type` carries, which it needs besides
 * `events:read` (or, for a webhook, besides `webhooks:*`) to receive the event: `task.*`,
 * `attachment.*`, `relation.*` and `comment.*` need `tasks:read`, `project.*` `projects:read`, `tag.*` `tags:read`, `user.*`
 * `account:read`. Undefined for a
 * type no scope reads (none is received by a token).
 */
export function scopeToReadEvent(type: string): Scope | undefined {
  switch (type.slice(0, type.indexOf('.'))) {
    case 'task':
    case 'attachment':
    case 'relation':
    case 'comment':
      return 'tasks:read';
    case 'project':
      return 'projects:read';
    case 'tag':
      return 'tags:read';
    case 'user':
      return 'account:read';
    default:
      return undefined;
  }
}

/** Route metadata: the scope a personal access token needs for the operation. */
export const needs = (scope: Scope) => ({ scope });
/** Route metadata: only an access token from a login may call the operation (a personal access token is 403). */
export const loginOnly = { loginOnly: true } as const;

const isScope = (value: unknown): value is Scope =>
  typeof value === 'string' && (SCOPES as readonly string[]).includes(value);

/** The scope an operation declares, if any. Called for every request: a plain check, no schema. */
export function scopeOf(route: AppRoute): Scope | undefined {
  const metadata: unknown = route.metadata;
  if (typeof metadata !== 'object' || metadata === null || !('scope' in metadata)) return undefined;
  return isScope(metadata.scope) ? metadata.scope : undefined;
}

/** Whether the operation is for login sessions only (token management, logout). */
export function isLoginOnly(route: AppRoute): boolean {
  const metadata: unknown = route.metadata;
  return typeof metadata === 'object' && metadata !== null && 'loginOnly' in metadata && metadata.loginOnly === true;
}

/** Whether `granted` includes `needed`; a `write` scope includes its `read`. */
export function grantsScope(granted: readonly Scope[], needed: Scope): boolean {
  const writing = needed.endsWith(':read') ? needed.replace(/:read$/, ':write') : undefined;
  return granted.some((scope) => scope === needed || scope === writing);
}
