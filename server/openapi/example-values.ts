// The objects the document's examples are made of: one small, consistent world (Ada's tasks and tags),
// typed by the contract so that an example cannot show a field the service does not send.
import type {
  ActivityEntry,
  Attachment,
  Comment,
  AuthResult,
  CreatedPersonalAccessToken,
  CreatedWebhook,
  Delivery,
  Event,
  OAuthGrant,
  Member,
  PersonalAccessToken,
  Project,
  Relation,
  Tag,
  Task,
  User,
  Webhook,
} from '@task-service/client';

export const ids = {
  ada: '0193a5c0-3c1e-7a2b-8d4f-1e2a3b4c5d6e',
  grace: '0193a5c0-5f2a-7c4d-9e1f-2a3b4c5d6e7f',
  alan: '0193a5c9-6a7b-7c8d-9e0f-1a2b3c4d5e6f',
  task: '0193a5c2-7d4e-7b3a-9c1f-2e4d6f8a0b1c',
  tagUrgent: '0193a5c1-2b3c-7d4e-8f5a-6b7c8d9e0f1a',
  tagWork: '0193a5c1-4d5e-7f6a-9b7c-8d9e0f1a2b3c',
  attachment: '0193a5c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f',
  webhook: '0193a5c6-0e1f-7a2b-8c3d-4e5f6a7b8c9d',
  delivery: '0193a5c7-5b6c-7d8e-9f0a-1b2c3d4e5f6a',
  event: '0193a5c5-8c9d-7e0f-8a1b-2c3d4e5f6a7b',
  token: '0193a5c8-2d3e-7f4a-8b5c-6d7e8f9a0b1c',
  grant: '0193a5c9-4e5f-7a6b-9c7d-8e9f0a1b2c3d',
  client: '0193a5c9-1a2b-7c3d-8e4f-5a6b7c8d9e0f',
  project: '0193a5c9-6e7f-7a8b-9c0d-1e2f3a4b5c6d',
  otherTask: '0193a5c2-9e0f-7a1b-8c2d-3e4f5a6b7c8d',
  oldTask: '0193a5c2-1f2a-7b3c-9d4e-5f6a7b8c9d0e',
  comment: '0193a5c3-9a0b-7c1d-8e2f-3a4b5c6d7e8f',
  commentEvent: '0193a5c3-9a0b-7c1d-8e2f-4b5c6d7e8f90',
  createdEvent: '0193a5c2-7d4f-7a1b-8c2d-3e4f5a6b7c8d',
};

/** The path parameter values every example path is written with. */
export const pathParamValues: Record<string, string> = {
  user_id: ids.ada,
  task_id: ids.task,
  tag_id: ids.tagUrgent,
  attach_id: ids.attachment,
  webhook_id: ids.webhook,
  delivery_id: ids.delivery,
  grant_id: ids.grant,
  token_id: ids.token,
  project_id: ids.project,
  type: 'blocks',
  other_id: ids.otherTask,
  comment_id: ids.comment,
  code: 'precondition_failed',
};

export const requestId = '0193a5c2-8f00-7e1d-b2a4-6c3e5f7a9b0d';

export const ada: User = {
  id: ids.ada,
  email: 'ada@example.com',
  name: 'Ada Lovelace',
  role: 'user',
  createdAt: '2026-11-02T09:14:03.120Z',
  updatedAt: '2026-11-02T09:14:03.120Z',
};

export const grace: User = {
  id: ids.grace,
  email: 'grace@example.com',
  name: 'Grace Hopper',
  role: 'admin',
  createdAt: '2026-10-28T16:40:11.502Z',
  updatedAt: '2026-11-05T08:02:47.913Z',
};

export const authResult: AuthResult = {
  user: ada,
  accessToken:
    'eyJhbGciOiJFZERTQSIsInR5cCI6ImF0K2p3dCIsImtpZCI6Ikp4M1FIM2ZPNXAwY1NkNE4yYjFyMFlrTTJhSnRRNnF2WmtxOHBPMW40d0UifQ.eyJyb2xlIjoidXNlciIsInNpZCI6IjAxOTNhNWMwLTlhMWItN2MyZC04ZTNmLTRhNWI2YzdkOGU5ZiIsImlzcyI6InRhc2stc2VydmljZSIsImF1ZCI6InRhc2stc2VydmljZSIsInN1YiI6IjAxOTNhNWMwLTNjMWUtN2EyYi04ZDRmLTFlMmEzYjRjNWQ2ZSIsImlhdCI6MTc5NTg0OTIwMCwiZXhwIjoxNzk1ODUwMTAwLCJqdGkiOiIwMTkzYTVkMC0wYjFjLTdkMmUtOWYzYS00YjVjNmQ3ZThmOTAifQ.a9rJbAeDaRzaO_j_Iug5IFc_ft8ZC2h6dO8YhMf-7KkVakel-t1CzjzkLMsqCkttkaNg6AZFUkz0KNPfVeSNCw',
  refreshToken: 'UxhrrIXgfs9-_3k9ccwJ6TV7B42ltEFX0_YAqrfv44w',
  tokenType: 'Bearer',
  expiresIn: 900,
};

export const tagUrgent: Tag = {
  id: ids.tagUrgent,
  ownerId: ids.ada,
  projectId: null,
  name: 'urgent',
  color: '#e5484d',
  createdAt: '2026-11-03T10:00:00.000Z',
};
export const tagWork: Tag = {
  id: ids.tagWork,
  ownerId: ids.ada,
  projectId: null,
  name: 'work',
  color: '#3e63dd',
  createdAt: '2026-11-03T10:00:05.250Z',
};

export const task: Task = {
  id: ids.task,
  ownerId: ids.ada,
  assigneeId: ids.grace,
  projectId: null,
  parentId: null,
  title: 'Write the quarterly report',
  description: 'Figures from the finance sheet; send the draft to Grace by Friday.',
  status: 'in_progress',
  priority: 'high',
  dueAt: '2026-12-01T17:00:00.000Z',
  completedAt: null,
  tags: [
    { id: ids.tagUrgent, name: 'urgent', color: '#e5484d' },
    { id: ids.tagWork, name: 'work', color: '#3e63dd' },
  ],
  attachmentCount: 1,
  commentCount: 1,
  subtaskCount: 3,
  subtasksDone: 1,
  blocked: false,
  version: 5,
  createdAt: '2026-11-20T08:30:00.000Z',
  updatedAt: '2026-11-22T15:04:05.000Z',
};

export const newTask: Task = {
  ...task,
  assigneeId: null,
  status: 'todo',
  tags: [],
  attachmentCount: 0,
  commentCount: 0,
  subtaskCount: 0,
  subtasksDone: 0,
  version: 1,
  updatedAt: task.createdAt,
};

/** The quarterly report blocks sending the figures to the board. */
export const relation: Relation = {
  type: 'blocks',
  task: { id: ids.otherTask, title: 'Send the figures to the board', status: 'todo' },
};

export const comment: Comment = {
  id: ids.comment,
  taskId: ids.task,
  authorId: ids.grace,
  body: 'The **Q3 figures** are in the sheet now.',
  createdAt: '2026-11-21T10:12:00.000Z',
  updatedAt: '2026-11-21T10:15:30.000Z',
  editedAt: '2026-11-21T10:15:30.000Z',
};

/** The task's history, newest first: its last change, a comment, and its creation. */
export const activity: ActivityEntry[] = [
  {
    id: ids.event,
    at: task.updatedAt,
    actorId: ids.ada,
    type: 'task.updated',
    changes: [{ field: 'status', from: 'todo', to: 'in_progress' }],
  },
  {
    id: ids.commentEvent,
    at: comment.createdAt,
    actorId: ids.grace,
    type: 'comment.created',
    changes: [{ field: 'comment', from: null, to: { id: ids.comment } }],
  },
  {
    id: ids.createdEvent,
    at: task.createdAt,
    actorId: ids.ada,
    type: 'task.created',
    changes: [
      { field: 'title', from: null, to: task.title },
      { field: 'status', from: null, to: 'todo' },
      { field: 'priority', from: null, to: 'high' },
    ],
  },
];

export const attachment: Attachment = {
  id: ids.attachment,
  taskId: ids.task,
  filename: 'report-draft.pdf',
  contentType: 'application/pdf',
  size: 184_320,
  sha256: '2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824',
  uploadedBy: ids.ada,
  createdAt: '2026-11-22T15:04:05.000Z',
};

/** A list cursor as the service signs it (`<payload>.<HMAC>`): opaque to clients. */
export const listCursor =
  'eyJzIjoiLWNyZWF0ZWRBdCIsInYiOiIyMDI2LTExLTIwVDA4OjMwOjAwLjAwMFoiLCJpZCI6IjAxOTNhNWMyLTdkNGUtN2IzYS05YzFmLTJlNGQ2ZjhhMGIxYyJ9.7I_ddmbxBXf_p3r_N9YzRg';
/** A changes-feed position: opaque to clients. */
export const feedCursor = 'NzQ4MjEzLjM';

export const taskUpdated: Event = {
  id: ids.event,
  type: 'task.updated',
  occurredAt: task.updatedAt,
  actorId: ids.ada,
  data: { task, previous: { status: 'todo' } },
};

export const webhook: Webhook = {
  id: ids.webhook,
  ownerId: ids.ada,
  url: 'https://hooks.example.com/task-service',
  events: ['task.created', 'task.updated', 'task.deleted'],
  description: 'Sync tasks to the team board',
  active: true,
  disabledReason: null,
  createdAt: '2026-11-10T12:00:00.000Z',
  updatedAt: '2026-11-10T12:00:00.000Z',
};

export const createdWebhook: CreatedWebhook = {
  ...webhook,
  secret: 'whsec_i2YPPpYj4RmCtB5OgwUsitByCaeA6J3Kg76uU7o2nBI=',
};

export const failedDelivery: Delivery = {
  id: ids.delivery,
  eventId: ids.event,
  eventType: 'task.updated',
  attempt: 2,
  state: 'failed',
  statusCode: 503,
  error: 'the receiver answered 503',
  durationMs: 412,
  createdAt: '2026-11-22T15:04:35.210Z',
  nextAttemptAt: null,
};

export const pendingRetry: Delivery = {
  ...failedDelivery,
  id: '0193a5c8-2f3a-7b4c-8d5e-6f7a8b9c0d1e',
  attempt: 3,
  state: 'pending',
  statusCode: null,
  error: null,
  durationMs: null,
  createdAt: '2026-11-22T15:20:00.000Z',
  nextAttemptAt: '2026-11-22T15:20:00.000Z',
};

export const personalAccessToken: PersonalAccessToken = {
  id: ids.token,
  name: 'Nightly report script',
  scopes: ['tasks:read', 'tags:read'],
  prefix: 'tsk_pat_YdAT',
  createdAt: '2026-11-22T15:20:00.000Z',
  expiresAt: '2026-12-22T15:20:00.000Z',
  lastUsedAt: null,
};

export const oauthGrant: OAuthGrant = {
  id: ids.grant,
  clientId: ids.client,
  clientName: 'Claude',
  scopes: ['tasks:write', 'tags:read'],
  resource: 'https://tasks.example.com/mcp',
  createdAt: '2026-11-22T16:00:00.000Z',
  lastUsedAt: '2026-11-22T16:45:00.000Z',
};

export const createdPersonalAccessToken: CreatedPersonalAccessToken = {
  ...personalAccessToken,
  token: 'tsk_pat_YdAT7TurZhuecoTvgbrdaJn7qsz7YuWpR3XxzfAIz220dn7jw',
};

export const project: Project = {
  id: ids.project,
  name: 'Analytical Engine',
  description: 'Notes and programs for the engine',
  role: 'admin',
  memberCount: 2,
  version: 3,
  createdAt: '2026-11-06T10:00:00.000Z',
  updatedAt: '2026-11-12T15:30:00.000Z',
};

export const adaMember: Member = {
  userId: ids.ada,
  name: 'Ada Lovelace',
  email: 'ada@example.com',
  role: 'admin',
  addedAt: '2026-11-06T10:00:00.000Z',
};

/** The user that the users.create example makes, added to a project by the addMember example. */
export const alanMember: Member = {
  userId: ids.alan,
  name: 'Alan Turing',
  email: 'alan@example.com',
  role: 'editor',
  addedAt: '2026-11-07T11:20:00.000Z',
};

export const graceMember: Member = {
  userId: ids.grace,
  name: 'Grace Hopper',
  email: 'grace@example.com',
  role: 'editor',
  addedAt: '2026-11-07T11:20:00.000Z',
};
