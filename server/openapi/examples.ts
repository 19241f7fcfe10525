// A realistic example of every request body and every success answer, by operation, shown in the
// OpenAPI document. Typed by the contract; test/openapi-examples.test.ts parses each with its schema.
import { isAppRoute, type AppRoute, type AppRouter } from '@ts-rest/core';
import { z } from 'zod';
import {
  contract,
  problemCatalogue,
  ProblemCodeSchema,
  type Contract,
  type Problem,
  type ProblemCode,
} from '@task-service/client';
import * as v from './example-values.js';
import { referencePage } from './reference-page.js';

type InputOf<T> = T extends z.ZodTypeAny ? z.input<T> : never;

type JsonSuccessStatuses<R extends AppRoute> = {
  [S in keyof R['responses']]: S extends 200 | 201 | 202 ? (R['responses'][S] extends z.ZodTypeAny ? S : never) : never;
}[keyof R['responses']];

/** A problem this operation answers with, beyond the common ones (400, 401, 415, 429, 500, 503). */
export interface ProblemExample {
  code: ProblemCode;
  detail: string;
}

interface OperationExamples<R extends AppRoute> {
  /** Required for every JSON body (multipart uploads are described, not exemplified). */
  request: R extends { contentType: 'multipart/form-data' }
    ? undefined
    : R extends { body: infer B extends z.ZodTypeAny }
      ? z.input<B>
      : undefined;
  /** Required for every success answer with a JSON body. */
  responses: { [S in JsonSuccessStatuses<R>]: InputOf<R['responses'][S]> };
  /** Answers that are not JSON, as text (an event stream, a page). */
  text?: Partial<Record<number, string>>;
  /** The problems of the statuses this operation declares itself, by status. */
  problems?: Partial<Record<number, ProblemExample[]>>;
}

type ContractExamples<T> = { [K in keyof T]: T[K] extends AppRoute ? OperationExamples<T[K]> : ContractExamples<T[K]> };

const noSuchTask = { code: 'not_found', detail: 'No such task', path: '/tasks/{task_id}' } satisfies ProblemExample & {
  path: string;
};
const noSuchUser: ProblemExample = { code: 'not_found', detail: 'No such user' };
const noSuchTag: ProblemExample = { code: 'not_found', detail: 'No such tag' };
const noSuchAttachment: ProblemExample = { code: 'not_found', detail: 'No such attachment' };
const noSuchComment: ProblemExample = { code: 'not_found', detail: 'No such comment' };
const noSuchWebhook: ProblemExample = { code: 'not_found', detail: 'No such webhook' };
const noSuchProject: ProblemExample = { code: 'not_found', detail: 'No such project' };
const noSuchMember: ProblemExample = { code: 'not_found', detail: 'No such member' };
const onlyProjectAdmins = (what: string): ProblemExample => ({
  code: 'forbidden',
  detail: `Only an admin of the project (or an administrator) may ${what}`,
});
const lastProjectAdmin: ProblemExample = {
  code: 'last_project_admin',
  detail: 'A project keeps at least one admin: make another member an admin first',
};
const projectChanged: ProblemExample = { code: 'precondition_failed', detail: 'The project is at version 3' };
const taskChanged: ProblemExample = { code: 'precondition_failed', detail: 'The task is at version 5' };
const emailTaken: ProblemExample = { code: 'email_taken', detail: 'An account with this email already exists' };
const lastAdmin: ProblemExample = { code: 'last_admin', detail: 'The service must keep at least one admin' };
const notAdmin = (what: string) =>
  ({ code: 'forbidden', detail: `Only an admin may ${what}`, path: '/users' }) satisfies ProblemExample & {
    path: string;
  };
const cursorExpired: ProblemExample = {
  code: 'cursor_expired',
  detail:
    'Events after this position are past the retention and were deleted: do a full sync, then follow the feed from its new cursor',
};
const quota = (name: string, limit: string, unit: string, variable: string): ProblemExample => ({
  code: 'quota_exceeded',
  detail: `Quota "${name}" reached: an account holds at most ${limit} ${unit} (${variable})`,
});

const taskPage = { items: [v.task], nextCursor: v.listCursor };

/** An example of every problem code, with the path of a request that could get it: the shared error answers show these. */
export const problemExamples: Record<ProblemCode, ProblemExample & { path: string }> = {
  validation_failed: {
    code: 'validation_failed',
    detail: 'body.title: String must contain at least 1 character(s)',
    path: '/tasks',
  },
  malformed_json: { code: 'malformed_json', detail: 'The body is not valid JSON', path: '/tasks' },
  unauthenticated: {
    code: 'unauthenticated',
    detail: 'The access token has expired; refresh the session (POST /auth/refresh) and retry',
    path: '/tasks',
  },
  invalid_credentials: {
    code: 'invalid_credentials',
    detail: 'The email or the password is wrong',
    path: '/auth/login',
  },
  forbidden: notAdmin('list users'),
  insufficient_scope: {
    code: 'insufficient_scope',
    detail: 'This personal access token lacks the scope "tasks:write" this operation needs',
    path: '/tasks',
  },
  not_found: noSuchTask,
  method_not_allowed: { code: 'method_not_allowed', detail: 'PUT is not allowed here', path: '/tags/{tag_id}' },
  email_taken: { ...emailTaken, path: '/auth/register' },
  tag_name_taken: {
    code: 'tag_name_taken',
    detail: 'You already have a tag named "Urgent" (names ignore case)',
    path: '/tags',
  },
  last_admin: { ...lastAdmin, path: '/users/{user_id}' },
  already_member: {
    code: 'already_member',
    detail: 'This user is already a member of the project',
    path: '/projects/{project_id}/members',
  },
  last_project_admin: { ...lastProjectAdmin, path: '/projects/{project_id}/members/{user_id}' },
  conflict: { code: 'conflict', detail: 'A task holds at most 20 attachments', path: '/tasks/{task_id}/attachments' },
  quota_exceeded: { ...quota('tasks', '100000', 'tasks', 'USER_MAX_TASKS'), path: '/tasks' },
  idempotency_key_in_use: {
    code: 'idempotency_key_in_use',
    detail: 'A request with this Idempotency-Key is still running: retry after it finished',
    path: '/tasks',
  },
  cursor_expired: { ...cursorExpired, path: '/changes' },
  precondition_failed: { ...taskChanged, path: '/tasks/{task_id}' },
  payload_too_large: { code: 'payload_too_large', detail: 'JSON bodies are limited to 1 MiB', path: '/tasks' },
  unsupported_media_type: {
    code: 'unsupported_media_type',
    detail: 'Send the body as application/json',
    path: '/tasks',
  },
  range_not_satisfiable: {
    code: 'range_not_satisfiable',
    detail: 'The content is 184320 bytes long',
    path: '/attachments/{attach_id}/content',
  },
  idempotency_key_reused: {
    code: 'idempotency_key_reused',
    detail: 'This Idempotency-Key was used with a different request: use a new key for a new request',
    path: '/tasks',
  },
  rate_limited: { code: 'rate_limited', detail: 'At most 600 requests a minute', path: '/tasks' },
  internal: { code: 'internal', detail: 'An unexpected error occurred', path: '/tasks' },
  unavailable: { code: 'unavailable', detail: 'The database is unreachable', path: '/tasks' },
  storage_full: {
    code: 'storage_full',
    detail: 'The attachment storage is full: nothing was stored; retry later',
    path: '/tasks/{task_id}/attachments',
  },
};

/** A request path with the example values in its parameters (`/tasks/{task_id}` or `/tasks/:task_id`). */
export const examplePath = (path: string): string =>
  path.replace(
    /\{(\w+)\}|:(\w+)/g,
    (whole, braced?: string, colon?: string) => v.pathParamValues[braced ?? colon ?? ''] ?? whole,
  );

/** The whole problem body the service would send: title and status from the catalogue, `type` its page. */
export function problemBody({ code, detail }: ProblemExample, path: string): Problem {
  const { title, status } = problemCatalogue[code];
  const errors =
    code === 'validation_failed'
      ? [{ path: 'body.title', code: 'too_small', message: 'String must contain at least 1 character(s)' }]
      : undefined;
  return {
    type: `/problems/${code}`,
    title,
    status,
    code,
    detail,
    instance: examplePath(path),
    requestId: v.requestId,
    ...(errors && { errors }),
  };
}

export const examples: ContractExamples<Contract> = {
  auth: {
    register: {
      request: { email: 'ada@example.com', password: 'correct horse battery staple', name: 'Ada Lovelace' },
      responses: { 201: v.authResult },
      problems: {
        403: [{ code: 'forbidden', detail: 'Self-registration is disabled on this service' }],
        409: [emailTaken],
        429: [
          {
            code: 'rate_limited',
            detail:
              'At most 20 registrations an hour from one address; try again in 38 minutes (at 2026-11-22T15:42:05.000Z)',
          },
        ],
      },
    },
    login: {
      request: { email: 'ada@example.com', password: 'correct horse battery staple' },
      responses: { 200: v.authResult },
      problems: {
        401: [{ code: 'invalid_credentials', detail: 'The email or the password is wrong' }],
        429: [
          {
            code: 'rate_limited',
            detail:
              'Too many failed logins for this account from your address; try again in 12 minutes (at 2026-11-22T15:16:05.000Z)',
          },
        ],
      },
    },
    refresh: {
      request: { refreshToken: v.authResult.refreshToken },
      responses: { 200: { ...v.authResult, refreshToken: 'pX4l9Q2aZ0c7mB1vR8sT3uW6yK5dN2hJ0gF7eC4bA1o' } },
      problems: { 401: [{ code: 'unauthenticated', detail: 'The refresh token is invalid, expired or revoked' }] },
    },
    logout: { request: undefined, responses: {} },
    me: { request: undefined, responses: { 200: v.ada } },
  },
  users: {
    list: {
      request: undefined,
      responses: { 200: { items: [v.grace, v.ada], nextCursor: null } },
      problems: { 403: [notAdmin('list users')] },
    },
    get: { request: undefined, responses: { 200: v.ada }, problems: { 404: [noSuchUser] } },
    listTasks: { request: undefined, responses: { 200: taskPage }, problems: { 404: [noSuchUser] } },
    create: {
      request: {
        email: 'alan@example.com',
        password: 'a long and private passphrase',
        name: 'Alan Turing',
        role: 'user',
      },
      responses: {
        201: { ...v.ada, id: v.ids.alan, email: 'alan@example.com', name: 'Alan Turing' },
      },
      problems: { 403: [notAdmin('create users')], 409: [emailTaken] },
    },
    replace: {
      request: { email: 'ada.lovelace@example.com', name: 'Ada King' },
      responses: {
        200: { ...v.ada, email: 'ada.lovelace@example.com', name: 'Ada King', updatedAt: '2026-11-22T15:04:05.000Z' },
      },
      problems: { 403: [notAdmin('change a role')], 404: [noSuchUser], 409: [emailTaken, lastAdmin] },
    },
    update: {
      request: { password: 'a new and longer passphrase', currentPassword: 'correct horse battery staple' },
      responses: { 200: { ...v.ada, updatedAt: '2026-11-22T15:04:05.000Z' } },
      problems: { 403: [notAdmin('change a role')], 404: [noSuchUser], 409: [emailTaken, lastAdmin] },
    },
    remove: { request: undefined, responses: {}, problems: { 404: [noSuchUser], 409: [lastAdmin] } },
  },
  tasks: {
    list: { request: undefined, responses: { 200: taskPage } },
    get: { request: undefined, responses: { 200: v.task }, problems: { 404: [noSuchTask] } },
    create: {
      request: {
        title: 'Write the quarterly report',
        description: 'Figures from the finance sheet; send the draft to Grace by Friday.',
        priority: 'high',
        dueAt: '2026-12-01T17:00:00Z',
      },
      responses: { 201: v.newTask },
      problems: { 409: [quota('tasks', '100000', 'tasks', 'USER_MAX_TASKS')] },
    },
    replace: {
      request: {
        title: 'Write the quarterly report',
        description: 'Figures from the finance sheet; send the draft to Grace by Friday.',
        status: 'in_progress',
        priority: 'high',
        dueAt: '2026-12-01T17:00:00Z',
        assigneeId: null,
      },
      responses: { 200: v.task },
      problems: { 404: [noSuchTask], 412: [taskChanged] },
    },
    update: {
      request: { status: 'done' },
      responses: {
        200: {
          ...v.task,
          status: 'done',
          completedAt: '2026-11-23T10:12:45.318Z',
          version: 5,
          updatedAt: '2026-11-23T10:12:45.318Z',
        },
      },
      problems: { 404: [noSuchTask], 412: [taskChanged] },
    },
    remove: {
      request: undefined,
      responses: {},
      problems: {
        403: [{ code: 'forbidden', detail: 'Only the owner of a task or an admin may delete it' }],
        404: [noSuchTask],
        412: [taskChanged],
      },
    },
  },
  tags: {
    list: { request: undefined, responses: { 200: { items: [v.tagUrgent, v.tagWork], nextCursor: null } } },
    get: { request: undefined, responses: { 200: v.tagUrgent }, problems: { 404: [noSuchTag] } },
    create: {
      request: { name: 'urgent', color: '#E5484D' },
      responses: { 201: v.tagUrgent },
      problems: {
        409: [
          { code: 'tag_name_taken', detail: 'You already have a tag named "Urgent" (names ignore case)' },
          quota('tags', '1000', 'tags', 'USER_MAX_TAGS'),
        ],
      },
    },
    update: {
      request: { name: 'blocker' },
      responses: { 200: { ...v.tagUrgent, name: 'blocker' } },
      problems: {
        404: [noSuchTag],
        409: [{ code: 'tag_name_taken', detail: 'You already have a tag named "blocker" (names ignore case)' }],
      },
    },
    remove: { request: undefined, responses: {}, problems: { 404: [noSuchTag] } },
    listForTask: {
      request: undefined,
      responses: { 200: { items: [v.tagUrgent, v.tagWork] } },
      problems: { 404: [noSuchTask] },
    },
    // 409: only a retry racing the first request with its Idempotency-Key (added to every creating POST's 409).
    addToTask: {
      request: undefined,
      responses: { 200: v.tagUrgent, 201: v.tagUrgent },
      problems: { 404: [noSuchTag], 409: [] },
    },
    removeFromTask: {
      request: undefined,
      responses: {},
      problems: { 404: [{ code: 'not_found', detail: 'The tag is not on this task' }] },
    },
  },
  relations: {
    list: {
      request: undefined,
      responses: {
        200: {
          items: [
            v.relation,
            { type: 'duplicated_by', task: { id: v.ids.oldTask, title: 'Quarterly report (old)', status: 'done' } },
          ],
        },
      },
      problems: { 404: [noSuchTask] },
    },
    create: {
      request: { type: 'blocks', taskId: v.ids.otherTask },
      responses: { 200: v.relation, 201: v.relation },
      problems: {
        403: [{ code: 'forbidden', detail: "Only an editor or admin of the task's project may change its relations" }],
        404: [noSuchTask],
        409: [{ code: 'conflict', detail: 'A task takes part in at most 500 relations' }],
      },
    },
    remove: {
      request: undefined,
      responses: {},
      problems: {
        403: [{ code: 'forbidden', detail: "Only an editor or admin of the task's project may change its relations" }],
        404: [{ code: 'not_found', detail: 'No such relation' }],
      },
    },
  },
  projects: {
    list: { request: undefined, responses: { 200: { items: [v.project], nextCursor: null } } },
    create: {
      request: { name: 'Analytical Engine', description: 'Notes and programs for the engine' },
      responses: { 201: { ...v.project, memberCount: 1, version: 1, updatedAt: v.project.createdAt } },
      problems: { 409: [quota('projects', '1000', 'projects', 'USER_MAX_PROJECTS')] },
    },
    get: { request: undefined, responses: { 200: v.project }, problems: { 404: [noSuchProject] } },
    update: {
      request: { name: 'Difference Engine' },
      responses: { 200: { ...v.project, name: 'Difference Engine', version: 4 } },
      problems: { 403: [onlyProjectAdmins('change the project')], 404: [noSuchProject], 412: [projectChanged] },
    },
    remove: {
      request: undefined,
      responses: {},
      problems: { 403: [onlyProjectAdmins('delete the project')], 404: [noSuchProject], 412: [projectChanged] },
    },
    listMembers: {
      request: undefined,
      responses: { 200: { items: [v.adaMember, v.graceMember], nextCursor: null } },
      problems: { 404: [noSuchProject] },
    },
    addMember: {
      request: { email: 'alan@example.com', role: 'editor' },
      responses: { 201: v.alanMember },
      problems: {
        403: [onlyProjectAdmins('add members')],
        404: [noSuchProject, { code: 'not_found', detail: 'No such user' }],
        409: [
          { code: 'already_member', detail: 'This user is already a member of the project' },
          {
            code: 'quota_exceeded',
            detail: 'Quota "projectMembers" reached: a project has at most 1000 members (PROJECT_MAX_MEMBERS)',
          },
        ],
      },
    },
    updateMember: {
      request: { role: 'viewer' },
      responses: { 200: { ...v.graceMember, role: 'viewer' } },
      problems: {
        403: [onlyProjectAdmins("change a member's role")],
        404: [noSuchProject, noSuchMember],
        409: [lastProjectAdmin],
      },
    },
    removeMember: {
      request: undefined,
      responses: {},
      problems: {
        403: [onlyProjectAdmins('remove another member')],
        404: [noSuchProject, noSuchMember],
        409: [lastProjectAdmin],
      },
    },
  },
  attachments: {
    upload: {
      request: undefined,
      responses: { 201: v.attachment },
      problems: {
        404: [noSuchTask],
        409: [
          { code: 'conflict', detail: 'A task holds at most 20 attachments' },
          quota('storageBytes', '1073741824', 'bytes of attachments', 'USER_STORAGE_QUOTA_BYTES'),
        ],
        413: [{ code: 'payload_too_large', detail: 'Attachments are limited to 26214400 bytes' }],
        507: [{ code: 'storage_full', detail: 'The attachment storage is full: nothing was stored; retry later' }],
      },
    },
    listForTask: { request: undefined, responses: { 200: { items: [v.attachment] } }, problems: { 404: [noSuchTask] } },
    get: { request: undefined, responses: { 200: v.attachment }, problems: { 404: [noSuchAttachment] } },
    download: {
      request: undefined,
      responses: {},
      problems: {
        404: [noSuchAttachment],
        416: [{ code: 'range_not_satisfiable', detail: 'The content is 184320 bytes long' }],
      },
    },
    remove: {
      request: undefined,
      responses: {},
      problems: {
        403: [
          { code: 'forbidden', detail: "Only the task's owner, the uploader or an admin may delete an attachment" },
        ],
        404: [noSuchAttachment],
      },
    },
  },
  comments: {
    listForTask: {
      request: undefined,
      responses: { 200: { items: [v.comment], nextCursor: null } },
      problems: { 404: [noSuchTask] },
    },
    create: {
      request: { body: v.comment.body },
      responses: { 201: { ...v.comment, updatedAt: v.comment.createdAt, editedAt: null } },
      problems: {
        403: [
          {
            code: 'forbidden',
            detail:
              "Only whoever may change the task comments on it: an editor or admin of the task's project (a viewer reads comments)",
          },
        ],
        404: [noSuchTask],
        409: [
          {
            code: 'quota_exceeded',
            detail: 'Quota "taskComments" reached: a task has at most 10000 comments (TASK_MAX_COMMENTS)',
          },
        ],
      },
    },
    get: { request: undefined, responses: { 200: v.comment }, problems: { 404: [noSuchComment] } },
    update: {
      request: { body: v.comment.body },
      responses: { 200: v.comment },
      problems: {
        403: [
          { code: 'forbidden', detail: 'Only its author, while they may still comment on the task, edits a comment' },
        ],
        404: [noSuchComment],
      },
    },
    remove: {
      request: undefined,
      responses: {},
      problems: {
        403: [
          {
            code: 'forbidden',
            detail:
              "Only its author, an admin of the task's project, the owner of a personal task or an administrator deletes a comment",
          },
        ],
        404: [noSuchComment],
      },
    },
  },
  activity: {
    listForTask: {
      request: undefined,
      responses: { 200: { items: v.activity, nextCursor: v.listCursor } },
      problems: { 404: [noSuchTask] },
    },
  },
  events: {
    changes: {
      request: undefined,
      responses: {
        200: {
          items: [
            v.taskUpdated,
            {
              id: '0193a5c5-9d0e-7f1a-8b2c-3d4e5f6a7b8c',
              type: 'tag.deleted',
              occurredAt: '2026-11-22T15:06:12.004Z',
              actorId: v.ids.ada,
              data: { tagId: v.ids.tagWork },
            },
          ],
          nextCursor: v.feedCursor,
        },
      },
      problems: { 410: [cursorExpired] },
    },
    stream: {
      request: undefined,
      responses: {},
      text: {
        200: `: connected\n\nid: ${v.ids.event}\nevent: task.updated\ndata: ${JSON.stringify(v.taskUpdated)}\n\n: heartbeat\n\n`,
      },
      problems: { 410: [cursorExpired] },
    },
  },
  webhooks: {
    create: {
      request: {
        url: 'https://hooks.example.com/task-service',
        events: ['task.created', 'task.updated', 'task.deleted'],
        description: 'Sync tasks to the team board',
      },
      responses: { 201: v.createdWebhook },
      problems: { 409: [] },
    },
    list: { request: undefined, responses: { 200: { items: [v.webhook], nextCursor: null } } },
    get: { request: undefined, responses: { 200: v.webhook }, problems: { 404: [noSuchWebhook] } },
    update: {
      request: { active: false },
      responses: {
        200: {
          ...v.webhook,
          active: false,
          disabledReason: 'switched off by its owner',
          updatedAt: '2026-11-22T15:30:00.000Z',
        },
      },
      problems: { 404: [noSuchWebhook] },
    },
    remove: { request: undefined, responses: {}, problems: { 404: [noSuchWebhook] } },
    deliveries: {
      request: undefined,
      responses: { 200: { items: [v.failedDelivery], nextCursor: null } },
      problems: { 404: [noSuchWebhook] },
    },
    retry: {
      request: undefined,
      responses: { 202: v.pendingRetry },
      problems: {
        404: [{ code: 'not_found', detail: 'No such delivery' }],
        409: [{ code: 'conflict', detail: 'The webhook is switched off: switch it on (PATCH active: true) first' }],
      },
    },
  },
  personalAccessTokens: {
    create: {
      request: { name: 'Nightly report script', scopes: ['tasks:read', 'tags:read'], expiresInDays: 30 },
      responses: { 201: v.createdPersonalAccessToken },
      problems: {
        403: [
          {
            code: 'forbidden',
            detail: 'This operation needs an access token from a login, not a personal access token or an OAuth token',
          },
        ],
        409: [
          {
            code: 'quota_exceeded',
            detail: 'An account holds at most 50 live personal access tokens: revoke one first',
          },
        ],
      },
    },
    list: { request: undefined, responses: { 200: { items: [v.personalAccessToken] } } },
    get: {
      request: undefined,
      responses: { 200: v.personalAccessToken },
      problems: { 404: [{ code: 'not_found', detail: 'No such token' }] },
    },
    remove: { request: undefined, responses: {}, problems: { 404: [{ code: 'not_found', detail: 'No such token' }] } },
  },
  oauthGrants: {
    list: { request: undefined, responses: { 200: { items: [v.oauthGrant] } } },
    remove: { request: undefined, responses: {}, problems: { 404: [{ code: 'not_found', detail: 'No such grant' }] } },
  },
  service: {
    healthz: { request: undefined, responses: { 200: { status: 'ok' } } },
    readyz: { request: undefined, responses: { 200: { status: 'ready', database: 'up', pendingMigrations: [] } } },
    jwks: {
      request: undefined,
      responses: {
        200: {
          keys: [
            {
              kty: 'OKP',
              crv: 'Ed25519',
              x: 'lLdmVzxWHw1AJhjc6Q1-oJ1ZtM73ihc82DR5FOQ7gkk',
              kid: 'Jx3QH3fO5p0cSd4N2b1r0YkM2aJtQ6qvZkq8pO1n4wE',
              alg: 'EdDSA',
              use: 'sig',
            },
          ],
        },
      },
    },
  },
  docs: {
    openapi: {
      request: undefined,
      responses: {
        200: {
          openapi: '3.0.2',
          info: { title: 'Task service', version: '0.1.0' },
          paths: { '/healthz': { get: { operationId: 'service.healthz' } } },
        },
      },
    },
    reference: { request: undefined, responses: {}, text: { 200: referencePage('/docs/assets/3f9c2a1b7e4d') } },
    problems: {
      request: undefined,
      responses: {
        200: {
          items: [
            {
              code: 'precondition_failed',
              status: 412,
              title: 'Precondition failed',
              meaning:
                'If-Match did not match the current ETag: the task changed since you read it. Nothing was changed.',
              action:
                'GET the task again (new ETag), reapply your change to what it is now, and send it with the new If-Match.',
            },
          ],
        },
      },
    },
    problem: {
      request: undefined,
      responses: {
        200: {
          code: 'precondition_failed',
          status: 412,
          title: 'Precondition failed',
          meaning: 'If-Match did not match the current ETag: the task changed since you read it. Nothing was changed.',
          action:
            'GET the task again (new ETag), reapply your change to what it is now, and send it with the new If-Match.',
        },
      },
      problems: { 404: [{ code: 'not_found', detail: 'No problem code no_such_code' }] },
    },
  },
};

/** One operation's examples with the types erased, as the document and the tests read them. */
const AnyOperationExamplesSchema = z.object({
  request: z.unknown(),
  responses: z.record(z.unknown()),
  text: z.record(z.string()).optional(),
  problems: z.record(z.array(z.object({ code: ProblemCodeSchema, detail: z.string() }))).optional(),
});
export type AnyOperationExamples = z.infer<typeof AnyOperationExamplesSchema>;

function collect(
  router: AppRouter,
  tree: unknown,
  found: Map<AppRoute, AnyOperationExamples>,
): Map<AppRoute, AnyOperationExamples> {
  for (const [key, entry] of Object.entries(router)) {
    const node: unknown = typeof tree === 'object' && tree !== null ? Reflect.get(tree, key) : undefined;
    if (isAppRoute(entry)) found.set(entry, AnyOperationExamplesSchema.parse(node));
    else collect(entry, node, found);
  }
  return found;
}

/** Every operation's examples, by the contract's route object. */
export const examplesByRoute: ReadonlyMap<AppRoute, AnyOperationExamples> = collect(contract, examples, new Map());
