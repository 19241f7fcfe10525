// What each problem code means and what a client should do about it: served at /problems/{code},
// which every problem's `type` names, and usable by clients to explain an error.
import { z } from 'zod';
import { ProblemCodeSchema, type Alias, type ProblemCode } from './common.js';

const problemPageSchema = z.object({
  code: ProblemCodeSchema.describe('The stable code, as in a problem body'),
  status: z.number().int().describe('The HTTP status it comes with'),
  title: z.string().describe("The problem body's title"),
  meaning: z.string().describe('What happened'),
  action: z.string().describe('What a client should do about it'),
});
export interface ProblemPage extends z.output<typeof problemPageSchema> {}
/** The schema's own type, by name (it keeps `.strict`). */
export interface ProblemPageSchemaType extends Alias<typeof problemPageSchema> {}
export const ProblemPageSchema: ProblemPageSchemaType = problemPageSchema;

type Entry = Omit<ProblemPage, 'code'>;

export const problemCatalogue: Record<ProblemCode, Entry> = {
  validation_failed: {
    status: 400,
    title: 'Request validation failed',
    meaning:
      'A path parameter, query parameter, header or body field does not match the contract; `errors` lists every issue with its path (`body.title`, `query.status`).',
    action: 'Fix the fields named in `errors` and send the request again; retrying it unchanged fails the same way.',
  },
  malformed_json: {
    status: 400,
    title: 'Malformed JSON body',
    meaning: 'The body could not be parsed as JSON.',
    action: 'Send valid UTF-8 JSON with Content-Type: application/json.',
  },
  unauthenticated: {
    status: 401,
    title: 'Authentication required',
    meaning:
      'No access token was sent, it has expired, it is invalid, or its session has ended; `detail` and the WWW-Authenticate header say which.',
    action:
      'Expired: refresh the session with POST /auth/refresh and retry. Session ended or invalid: log in again. Missing: send Authorization: Bearer <accessToken>.',
  },
  invalid_credentials: {
    status: 401,
    title: 'Invalid email or password',
    meaning: 'The email is unknown or the password is wrong (the service does not say which).',
    action: 'Ask the user to check both. Repeated failures are throttled (429).',
  },
  forbidden: {
    status: 403,
    title: 'Forbidden',
    meaning:
      'You are authenticated, but your role or relation to the object does not allow this operation (e.g. a non-admin listing users, an assignee deleting a task).',
    action: 'Do not retry; ask an administrator or the owner.',
  },
  insufficient_scope: {
    status: 403,
    title: 'Insufficient scope',
    meaning:
      'The personal access token lacks the scope this operation needs; the WWW-Authenticate header names it (`scope="tasks:write"`).',
    action: 'Do not retry with this token: create one with the scope the header names (POST /tokens, from a login).',
  },
  not_found: {
    status: 404,
    title: 'Not found',
    meaning: 'There is no such resource, or it belongs to someone else (the service never says which).',
    action: 'Check the id; drop any copy you hold of a resource that is gone.',
  },
  method_not_allowed: {
    status: 405,
    title: 'Method not allowed',
    meaning: 'The path exists but not with this method; the Allow header lists the methods it takes.',
    action: 'Use one of the methods in Allow.',
  },
  email_taken: {
    status: 409,
    title: 'Email already registered',
    meaning: 'Another account has this email (compared ignoring case).',
    action: 'Log in instead, or choose another email.',
  },
  tag_name_taken: {
    status: 409,
    title: 'Tag name already in use',
    meaning: 'You already have a tag with this name (compared ignoring case).',
    action: 'Use the existing tag (GET /tags?q=name) or choose another name.',
  },
  last_admin: {
    status: 409,
    title: 'Cannot remove the last administrator',
    meaning: 'The change would leave the service without an administrator.',
    action: 'Make another user an administrator first.',
  },
  already_member: {
    status: 409,
    title: 'Already a member',
    meaning: 'The user is already a member of the project.',
    action: "Change the member's role instead (PATCH /projects/{project_id}/members/{user_id}), or leave it as it is.",
  },
  last_project_admin: {
    status: 409,
    title: 'Cannot remove the last admin of the project',
    meaning: 'The change would leave the project without an admin: a project always keeps one.',
    action: 'Make another member an admin first, or delete the project.',
  },
  conflict: {
    status: 409,
    title: 'Conflict',
    meaning: 'The request breaks a rule of the current state, e.g. a task already holds the most attachments allowed.',
    action: 'Read `detail`, change the state (delete an attachment, say) and try again.',
  },
  quota_exceeded: {
    status: 409,
    title: 'Quota exceeded',
    meaning:
      'The account holds as much as one account may (`detail` names the quota: stored attachment bytes, tasks, tags, webhooks or projects; administrators are exempt), or a project has as many members as one project may (PROJECT_MAX_MEMBERS).',
    action:
      'Delete what is no longer needed (attachments, tasks, tags, projects or members) and try again, or ask an administrator to raise the limit.',
  },
  idempotency_key_in_use: {
    status: 409,
    title: 'Idempotency key in use',
    meaning: 'A request with this `Idempotency-Key` is still being processed.',
    action: 'Wait a moment and send the same request again: it then gets the first answer, replayed.',
  },
  cursor_expired: {
    status: 410,
    title: 'Cursor expired',
    meaning:
      'The changes-feed cursor (or `Last-Event-ID`) is older than the event retention (`EVENT_RETENTION_DAYS`): events after it may be gone.',
    action: 'Sync in full (list what you need), then follow `GET /changes` from a new cursor.',
  },
  precondition_failed: {
    status: 412,
    title: 'Precondition failed',
    meaning: 'If-Match did not match the current ETag: the task changed since you read it. Nothing was changed.',
    action: 'GET the task again (new ETag), reapply your change to what it is now, and send it with the new If-Match.',
  },
  payload_too_large: {
    status: 413,
    title: 'Payload too large',
    meaning: 'A JSON body over 1 MiB, or an attachment over ATTACHMENT_MAX_BYTES.',
    action: 'Send less: shorten the body or the file.',
  },
  unsupported_media_type: {
    status: 415,
    title: 'Unsupported media type',
    meaning:
      'The body is not in the media type the operation takes (JSON in UTF-8; multipart/form-data for uploads; merge-patch+json also for PATCH).',
    action: 'Send the Content-Type the operation documents.',
  },
  range_not_satisfiable: {
    status: 416,
    title: 'Range not satisfiable',
    meaning:
      'The requested byte range starts beyond the end of the attachment; Content-Range gives its size (`bytes */<size>`).',
    action: 'Ask for a range within the size, or for the whole content.',
  },
  idempotency_key_reused: {
    status: 422,
    title: 'Idempotency key reused',
    meaning: 'This `Idempotency-Key` was sent before with a different request (method, path or body).',
    action: 'Use a new key for a new request; reuse a key only to retry the very same request.',
  },
  rate_limited: {
    status: 429,
    title: 'Too many requests',
    meaning: 'You exceeded a request budget (the general rate limit, or the login or registration throttle).',
    action:
      'Wait the number of seconds in Retry-After, then retry; the typed client does so for calls that are safe to repeat.',
  },
  internal: {
    status: 500,
    title: 'Internal server error',
    meaning: 'The service failed unexpectedly; no internals are disclosed.',
    action: 'Retry later; report the requestId to the operators if it persists.',
  },
  unavailable: {
    status: 503,
    title: 'Service unavailable',
    meaning: 'The database cannot be reached at the moment.',
    action: 'Wait the seconds in Retry-After and retry.',
  },
  storage_full: {
    status: 507,
    title: 'Insufficient storage',
    meaning:
      "The service's attachment storage is full: the upload was not kept (nothing of it is stored). The request was not at fault.",
    action: 'Retry later, once the operators have made room; report the requestId to them if it persists.',
  },
};

/** The catalogue entry of `code`, if it is one. */
export function problemPage(code: string): ProblemPage | undefined {
  const known = ProblemCodeSchema.safeParse(code);
  return known.success ? { code: known.data, ...problemCatalogue[known.data] } : undefined;
}
