// Baseline (b), the stack's limit for GET /tasks/{id}: bare node:http doing what the service must,
// with the same libraries and nothing else: verify the access token with jose (EdDSA, issuer,
// audience, typ), read the session with the user's role (query 1) and the task with its tags and
// attachment count (query 2) with pg, check visibility, answer JSON with the task's ETag.
import { createServer } from 'node:http';
import { importJWK, jwtVerify } from 'jose';
import pg from 'pg';
import { listenAndReport } from './listen.js';
import { STACK_CONFIG_VARIABLE, StackConfigSchema } from './stack-config.js';

const config = StackConfigSchema.parse(JSON.parse(process.env[STACK_CONFIG_VARIABLE] ?? '{}'));
const key = await importJWK(config.jwk, 'EdDSA');
const pool = new pg.Pool({ connectionString: config.databaseUrl, max: config.poolSize });

const SESSION = 'SELECT s.user_id, s.revoked_at, u.role FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.id = $1';
const TASK = `
  SELECT t.id, t.owner_id, t.assignee_id, t.title, t.description, t.status, t.priority, t.due_at, t.completed_at, t.version, t.created_at, t.updated_at,
    coalesce((SELECT json_agg(json_build_object('id', g.id, 'name', g.name, 'color', g.color) ORDER BY g.name, g.id)
              FROM task_tags tt JOIN tags g ON g.id = tt.tag_id WHERE tt.task_id = t.id), '[]') AS tags,
    ${config.storedAttachmentCount ? 't.attachment_count' : '(SELECT count(*)::int FROM attachments a WHERE a.task_id = t.id)'} AS attachment_count
  FROM tasks t WHERE t.id = $1`;

interface SessionRow {
  user_id: string;
  revoked_at: Date | null;
  role: string;
}
interface TaskRow {
  id: string;
  owner_id: string;
  assignee_id: string | null;
  title: string;
  description: string;
  status: string;
  priority: string;
  due_at: Date | null;
  completed_at: Date | null;
  version: number;
  created_at: Date;
  updated_at: Date;
  tags: { id: string; name: string; color: string }[];
  attachment_count: number;
}

/** The caller's user id and role, or undefined for a bad token or an ended session. */
async function caller(authorization: string | undefined): Promise<{ userId: string; role: string } | undefined> {
  const token = /^Bearer (.+)$/.exec(authorization ?? '')?.[1];
  if (!token) return undefined;
  const { payload } = await jwtVerify(token, key, {
    algorithms: ['EdDSA'],
    issuer: config.issuer,
    audience: config.audience,
    typ: 'at+jwt',
    requiredClaims: ['sub', 'sid', 'role', 'iat', 'exp', 'jti'],
  }).catch(() => ({ payload: undefined }));
  const sid = payload?.sid;
  if (typeof sid !== 'string' || typeof payload?.sub !== 'string') return undefined;
  const { rows } = await pool.query<SessionRow>(SESSION, [sid]);
  const session = rows[0];
  if (!session || session.revoked_at || session.user_id !== payload.sub) return undefined;
  return { userId: session.user_id, role: session.role };
}

const serialize = (t: TaskRow) => ({
  id: t.id,
  ownerId: t.owner_id,
  assigneeId: t.assignee_id,
  title: t.title,
  description: t.description,
  status: t.status,
  priority: t.priority,
  dueAt: t.due_at?.toISOString() ?? null,
  completedAt: t.completed_at?.toISOString() ?? null,
  tags: t.tags,
  attachmentCount: t.attachment_count,
  version: t.version,
  createdAt: t.created_at.toISOString(),
  updatedAt: t.updated_at.toISOString(),
});

const server = createServer((req, res) => {
  const answer = (status: number, body: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers });
    res.end(JSON.stringify(body));
  };
  (async () => {
    const taskId = /^\/tasks\/([0-9a-f-]{36})$/.exec(req.url ?? '')?.[1];
    if (!taskId) return answer(404, { title: 'Not Found' });
    const who = await caller(req.headers.authorization);
    if (!who) return answer(401, { title: 'Unauthorized' });
    const task = (await pool.query<TaskRow>(TASK, [taskId])).rows[0];
    if (!task || (who.role !== 'admin' && task.owner_id !== who.userId && task.assignee_id !== who.userId)) return answer(404, { title: 'Not Found' });
    answer(200, serialize(task), { etag: `"${task.version}"` });
  })().catch(() => answer(500, { title: 'Internal Server Error' }));
});
await listenAndReport(server);
