// Seeding, fast: users through the API (real password hashes and sessions), everything else in a
// few set-based INSERTs straight into the service's database, then ANALYZE.
import pg from 'pg';
import { comment, register, login } from './api.js';
import { ADMIN } from './service.js';

export interface SeedSize {
  users: number;
  /** Accounts for the login workload alone, so that logins in flight are of distinct accounts, as real ones are. */
  loginAccounts: number;
  tasksPerUser: number;
  /** Projects shared by the project members, and their tasks in all (spread evenly). */
  projects: number;
  projectTasks: number;
  /** Users who are members of every project (and have no personal task): the project rows' callers. */
  projectMembers: number;
  /** Comments on the discussed task, a task of the first project that the project members read. */
  taskComments: number;
}

export interface BenchUser {
  id: string;
  email: string;
  password: string;
  token: string;
  /** The first of the user's own tasks, oldest first (at most TASKS_KEPT). */
  tasks: string[];
}

export interface Seeded {
  /** The users the load is spread over. */
  users: BenchUser[];
  /** The login workload's accounts (no tasks, no sessions). */
  loginAccounts: { email: string; password: string }[];
  adminToken: string;
  /** Members of every seeded project, with no personal task: the callers of the project list rows. */
  projectMembers: { id: string; token: string }[];
  /** A task of the first project with `comments` comments and `activity` entries, read by the project members. */
  discussedTask: { id: string; comments: number; activity: number };
  /** Tasks of the first user, oldest first, with their versions. */
  ownTasks: { id: string; version: number }[];
  /** Whether tasks keep a stored attachment_count (the schema of the day decides). */
  storedAttachmentCount: boolean;
  seconds: number;
}

/** Tasks of each user the workloads draw from: reads, and two disjoint sets to patch (service, twin). */
const TASKS_KEPT = 200;

const USER_PASSWORD = 'bench user password';
const TAGS_PER_USER = 5;

const INSERT_TAGS = `
  INSERT INTO tags (id, owner_id, name, name_key, color, created_at)
  SELECT gen_random_uuid(), u.id, 'tag-' || k, 'tag-' || k, '#3366cc', now()
  FROM unnest($1::uuid[]) AS u(id) CROSS JOIN generate_series(1, ${TAGS_PER_USER}) AS k`;

// Every fifth task is assigned to the next user; a third have no due date; titles sort randomly.
const INSERT_TASKS = `
  INSERT INTO tasks (id, owner_id, assignee_id, title, description, status, priority, due_at, completed_at, version, created_at, updated_at)
  SELECT gen_random_uuid(), u.id,
    CASE WHEN g.i % 5 = 0 THEN ($1::uuid[])[u.n % cardinality($1::uuid[]) + 1] END,
    'Task ' || substr(md5(u.id::text || g.i), 1, 12), '',
    (ARRAY['todo', 'in_progress', 'done'])[g.i % 3 + 1]::"TaskStatus",
    (ARRAY['low', 'medium', 'high', 'urgent'])[g.i % 4 + 1]::"TaskPriority",
    CASE WHEN g.i % 3 <> 0 THEN now() + g.i * interval '1 minute' END,
    CASE WHEN g.i % 3 = 2 THEN now() END,
    1, now() - ($2 - g.i) * interval '1 second', now() - ($2 - g.i) * interval '1 second'
  FROM unnest($1::uuid[]) WITH ORDINALITY AS u(id, n) CROSS JOIN generate_series(1, $2::int) AS g(i)`;

// About a third of each owner's tags on each task.
const INSERT_TASK_TAGS = `
  INSERT INTO task_tags (task_id, tag_id, created_at)
  SELECT t.id, g.id, now() FROM tasks t JOIN tags g ON g.owner_id = t.owner_id
  WHERE t.owner_id = ANY($1::uuid[]) AND abs(hashtext(t.id::text || g.id::text)) % 3 = 0`;

// Metadata rows only (their bytes are never downloaded): 2, 1, 1 and 0 on every four tasks, one per task on average.
const INSERT_ATTACHMENTS = `
  INSERT INTO attachments (id, task_id, filename, content_type, size, sha256, storage_key, uploaded_by, created_at)
  SELECT gen_random_uuid(), t.id, 'seeded-' || k || '.txt', 'text/plain', 1024, repeat('0', 64), 'seeded/' || gen_random_uuid(), t.owner_id, now()
  FROM (SELECT id, owner_id, row_number() OVER (ORDER BY id) AS rn FROM tasks WHERE owner_id = ANY($1::uuid[])) AS t
  CROSS JOIN generate_series(1, 2) AS k
  WHERE k <= CASE t.rn % 4 WHEN 0 THEN 2 WHEN 3 THEN 0 ELSE 1 END`;

const UPDATE_ATTACHMENT_COUNT = `
  UPDATE tasks t SET attachment_count = a.n
  FROM (SELECT task_id, count(*)::int AS n FROM attachments GROUP BY task_id) AS a
  WHERE a.task_id = t.id AND t.attachment_count IS DISTINCT FROM a.n`;

// Copies of a registered user's password hash: the service's own argon2 parameters, without a
// registration (a hash each, and the per-address registration limit) per account.
const INSERT_LOGIN_ACCOUNTS = `
  INSERT INTO users (id, email, name, role, password_hash, created_at, updated_at)
  SELECT gen_random_uuid(), 'bench-login-' || k || '@example.test', 'Bench Login ' || k, 'user', u.password_hash, now(), now()
  FROM users u CROSS JOIN generate_series(1, $2::int) AS k WHERE u.id = $1
  RETURNING email`;

// The load's users besides the first, registered one: copies of its row (its password hash, so its
// password), each then logged in through the API (a registration per user would meet the service's
// per-address registration limit).
const INSERT_USERS = `
  INSERT INTO users (id, email, name, role, password_hash, created_at, updated_at)
  SELECT gen_random_uuid(), 'bench-user-' || k || '@example.test', 'Bench User ' || k, 'user', u.password_hash, now(), now()
  FROM users u CROSS JOIN generate_series(2, $2::int) AS k WHERE u.id = $1
  RETURNING id, email`;

// The project members: copies of the first user's row, as the load's users are.
const INSERT_PROJECT_MEMBERS = `
  INSERT INTO users (id, email, name, role, password_hash, created_at, updated_at)
  SELECT gen_random_uuid(), 'bench-member-' || k || '@example.test', 'Bench Member ' || k, 'user', u.password_hash, now(), now()
  FROM users u CROSS JOIN generate_series(1, $2::int) AS k WHERE u.id = $1
  RETURNING id, email`;

// Projects made by the first member, every member in each (the first its admin, the others editors).
const INSERT_PROJECTS = `
  INSERT INTO projects (id, name, description, created_by, created_at, updated_at)
  SELECT gen_random_uuid(), 'Project ' || k, '', ($1::uuid[])[1], now(), now() FROM generate_series(1, $2::int) AS k
  RETURNING id`;

const INSERT_PROJECT_MEMBERSHIPS = `
  INSERT INTO project_members (project_id, user_id, role, added_at)
  SELECT p.id, m.id, CASE WHEN m.n = 1 THEN 'admin' ELSE 'editor' END::"ProjectRole", now()
  FROM unnest($1::uuid[]) AS p(id) CROSS JOIN unnest($2::uuid[]) WITH ORDINALITY AS m(id, n)`;

const INSERT_PROJECT_TAGS = `
  INSERT INTO tags (id, owner_id, project_id, name, name_key, color, created_at)
  SELECT gen_random_uuid(), ($2::uuid[])[1], p.id, 'tag-' || k, 'tag-' || k, '#3366cc', now()
  FROM unnest($1::uuid[]) AS p(id) CROSS JOIN generate_series(1, ${TAGS_PER_USER}) AS k`;

// The projects' tasks interleaved in time (a member's newest page holds tasks of many projects),
// owned by the members in turn, every fifth assigned to a member, as the personal ones otherwise.
const INSERT_PROJECT_TASKS = `
  INSERT INTO tasks (id, owner_id, assignee_id, project_id, title, description, status, priority, due_at, completed_at, version, created_at, updated_at)
  SELECT gen_random_uuid(), ($2::uuid[])[g.i % cardinality($2::uuid[]) + 1],
    CASE WHEN g.i % 5 = 0 THEN ($2::uuid[])[(g.i / 5) % cardinality($2::uuid[]) + 1] END,
    ($1::uuid[])[g.i % cardinality($1::uuid[]) + 1],
    'Task ' || substr(md5(g.i::text || 'project'), 1, 12), '',
    (ARRAY['todo', 'in_progress', 'done'])[g.i % 3 + 1]::"TaskStatus",
    (ARRAY['low', 'medium', 'high', 'urgent'])[g.i % 4 + 1]::"TaskPriority",
    CASE WHEN g.i % 3 <> 0 THEN now() + g.i * interval '1 second' END,
    CASE WHEN g.i % 3 = 2 THEN now() END,
    1, now() - ($3 - g.i) * interval '10 milliseconds', now() - ($3 - g.i) * interval '10 milliseconds'
  FROM generate_series(1, $3::int) AS g(i)`;

// About a third of each project's tags on each of its tasks.
const INSERT_PROJECT_TASK_TAGS = `
  INSERT INTO task_tags (task_id, tag_id, created_at)
  SELECT t.id, g.id, now() FROM tasks t JOIN tags g ON g.project_id = t.project_id
  WHERE t.project_id = ANY($1::uuid[]) AND abs(hashtext(t.id::text || g.id::text)) % 3 = 0`;

// A UUIDv7 of the instant `at` (48 bits of milliseconds, then random bits, version 7), as the
// service makes its ids: comments list in id order, which is then creation order.
const uuidv7At = (at: string) =>
  `encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) placing substring(int8send(floor(extract(epoch from ${at}) * 1000)::bigint) from 3) from 1 for 6), 52, 1), 53, 1), 'hex')::uuid`;

// The discussed task ($1 project, $2 owner, $3 created at) as its comments ($4 of them, one a
// minute from its creation on) leave it: each comment moved its version and commentCount. It is
// older than the projects' other tasks, so it sits on the members' last page, not on the pages
// the list rows read.
const INSERT_DISCUSSED_TASK = `
  INSERT INTO tasks (id, owner_id, project_id, title, description, status, priority, version, comment_count, created_at, updated_at)
  VALUES (${uuidv7At('$3::timestamptz')}, $2, $1, 'Discussed task', '', 'in_progress', 'high', 1 + $4::int, $4::int,
          $3::timestamptz, $3::timestamptz + $4::int * interval '1 minute')
  RETURNING id`;

// The comments ($2 of them on task $1, by the members $3 in turn, one a minute), each as the
// service writes it (updated_at its creation, never edited).
const INSERT_DISCUSSION_COMMENTS = `
  INSERT INTO comments (id, task_id, author_id, body, created_at, updated_at)
  SELECT ${uuidv7At('c.at')}, t.id, ($3::uuid[])[g.i % cardinality($3::uuid[]) + 1],
    'Comment ' || g.i || ': ' || rtrim(repeat('a few words on how it goes, ', 1 + g.i % 8), ', ') || '.', c.at, c.at
  FROM tasks t CROSS JOIN generate_series(1, $2::int) AS g(i)
  CROSS JOIN LATERAL (SELECT t.created_at + g.i * interval '1 minute' AS at) AS c
  WHERE t.id = $1`;

// The task's activity as server/events/activity.ts derives it from the events the service wrote:
// its task.created (the fields set at creation, in the order it lists them) and one comment.created
// per comment, by its author at its creation, under the event's own id. The task.updated written
// with each comment makes no entry (the commentCount it moves is the comment's entry). The events
// themselves are not seeded: no row of the bench reads the event log.
const INSERT_DISCUSSION_ACTIVITY = `
  INSERT INTO task_activity (task_id, at, id, actor_id, type, changes)
  SELECT t.id, t.created_at, ${uuidv7At('t.created_at')}, t.owner_id, 'task.created', jsonb_build_array(
    jsonb_build_object('field', 'title', 'from', NULL, 'to', t.title),
    jsonb_build_object('field', 'status', 'from', NULL, 'to', t.status),
    jsonb_build_object('field', 'priority', 'from', NULL, 'to', t.priority),
    jsonb_build_object('field', 'projectId', 'from', NULL, 'to', t.project_id))
  FROM tasks t WHERE t.id = $1
  UNION ALL
  SELECT c.task_id, c.created_at, ${uuidv7At('c.created_at')}, c.author_id, 'comment.created',
    jsonb_build_array(jsonb_build_object('field', 'comment', 'from', NULL, 'to', jsonb_build_object('id', c.id)))
  FROM comments c WHERE c.task_id = $1`;

// The task's newest two entries and the comments they name.
const NEWEST_ENTRIES = `
  SELECT a.type, a.actor_id, a.changes::text AS changes, c.id AS comment_id, c.author_id, c.edited_at, c.updated_at = c.created_at AS unedited
  FROM task_activity a LEFT JOIN comments c ON c.id = (a.changes -> 0 -> 'to' ->> 'id')::uuid
  WHERE a.task_id = $1 ORDER BY a.at DESC, a.id DESC LIMIT 2`;

const DISCUSSION_COUNTS = `
  SELECT t.version, t.comment_count,
    (SELECT count(*)::int FROM comments c WHERE c.task_id = t.id) AS comments,
    (SELECT count(*)::int FROM task_activity a WHERE a.task_id = t.id) AS activity
  FROM tasks t WHERE t.id = $1`;

/**
 * The discussed task in the first project: all but its last comment, and its activity, loaded in
 * bulk; the last comment written through the API. The rows the service wrote for it are then
 * compared with the bulk's: a seed that drifted from what the service writes stops the run.
 */
async function seedDiscussion(
  base: string,
  db: pg.Client,
  projectId: string,
  members: { id: string; token: string }[],
  comments: number,
): Promise<{ id: string; comments: number; activity: number }> {
  const [owner] = members;
  const writer = members[comments % members.length];
  if (!owner || !writer) throw new Error('no project member to discuss a task');
  const bulk = comments - 1;
  const createdAt = new Date(Date.now() - (bulk + 24 * 60) * 60_000);
  const { rows } = await db.query<{ id: string }>(INSERT_DISCUSSED_TASK, [projectId, owner.id, createdAt, bulk]);
  const id = rows[0]?.id;
  if (!id) throw new Error('the discussed task was not made');
  const authors = members.map((member) => member.id);
  await db.query(INSERT_DISCUSSION_COMMENTS, [id, bulk, authors]);
  await db.query(INSERT_DISCUSSION_ACTIVITY, [id]);
  const written = await comment(base, writer.token, id, `Comment ${comments}: the last word, through the API.`);
  const { rows: newest } = await db.query<{
    type: string;
    actor_id: string | null;
    changes: string;
    comment_id: string | null;
    author_id: string | null;
    edited_at: Date | null;
    unedited: boolean;
  }>(NEWEST_ENTRIES, [id]);
  const [byService, byBulk] = newest;
  const shape = (entry: typeof byService) =>
    entry && {
      type: entry.type,
      byAuthor: entry.actor_id !== null && entry.actor_id === entry.author_id,
      changes: entry.comment_id === null ? entry.changes : entry.changes.replaceAll(entry.comment_id, '<comment>'),
      edited: entry.edited_at !== null || !entry.unedited,
    };
  const { rows: counts } = await db.query<{
    version: number;
    comment_count: number;
    comments: number;
    activity: number;
  }>(DISCUSSION_COUNTS, [id]);
  const expected = { version: 1 + comments, comment_count: comments, comments, activity: comments + 1 };
  if (
    byService?.comment_id !== written.id ||
    JSON.stringify(shape(byService)) !== JSON.stringify(shape(byBulk)) ||
    JSON.stringify(counts[0]) !== JSON.stringify(expected)
  )
    throw new Error(
      `the seeded comments differ from what the service writes: newest entries ${JSON.stringify(newest)}, counts ${JSON.stringify(counts[0])} (expected ${JSON.stringify(expected)})`,
    );
  return { id, comments, activity: expected.activity };
}

/** The project members (logged in), their projects, the projects' tags and tasks. */
async function seedProjects(
  base: string,
  db: pg.Client,
  firstUserId: string,
  size: SeedSize,
): Promise<{ members: { id: string; token: string }[]; projectIds: string[] }> {
  const { rows: members } = await db.query<{ id: string; email: string }>(INSERT_PROJECT_MEMBERS, [
    firstUserId,
    size.projectMembers,
  ]);
  const loggedIn = await inBatches(members, 4, async ({ id, email }) => ({
    id,
    token: (await login(base, email, USER_PASSWORD)).accessToken,
  }));
  const memberIds = members.map((member) => member.id);
  const { rows: projects } = await db.query<{ id: string }>(INSERT_PROJECTS, [memberIds, size.projects]);
  const projectIds = projects.map((project) => project.id);
  await db.query(INSERT_PROJECT_MEMBERSHIPS, [projectIds, memberIds]);
  await db.query(INSERT_PROJECT_TAGS, [projectIds, memberIds]);
  await db.query(INSERT_PROJECT_TASKS, [projectIds, memberIds, size.projectTasks]);
  await db.query(INSERT_PROJECT_TASK_TAGS, [projectIds]);
  return { members: loggedIn, projectIds };
}

/** At most `limit` of `work` at once. */
async function inBatches<T, R>(items: T[], limit: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = [];
  for (let i = 0; i < items.length; i += limit)
    results.push(...(await Promise.all(items.slice(i, i + limit).map(work))));
  return results;
}

export async function seed(base: string, databaseUrl: string, size: SeedSize): Promise<Seeded> {
  const started = Date.now();
  const firstEmail = 'bench-user-1@example.test';
  const [first, adminLogin] = await Promise.all([
    register(base, firstEmail, USER_PASSWORD, 'Bench User 1'),
    login(base, ADMIN.email, ADMIN.password),
  ]);
  const adminToken = adminLogin.accessToken;
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    const { rows: others } = await db.query<{ id: string; email: string }>(INSERT_USERS, [first.user.id, size.users]);
    // Two logins at a time per core are as many as the service hashes at once.
    const loggedIn = await inBatches(others, 4, async ({ id, email }) => ({
      id,
      email,
      token: (await login(base, email, USER_PASSWORD)).accessToken,
    }));
    const accounts = [{ id: first.user.id, email: firstEmail, token: first.accessToken }, ...loggedIn];
    const ids = accounts.map((user) => user.id);
    const { rows: columns } = await db.query<{ column_name: string }>(
      "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'tasks'",
    );
    const storedAttachmentCount = columns.some((column) => column.column_name === 'attachment_count');
    const { rows: loginRows } = await db.query<{ email: string }>(INSERT_LOGIN_ACCOUNTS, [ids[0], size.loginAccounts]);
    const loginAccounts = loginRows.map(({ email }) => ({ email, password: USER_PASSWORD }));
    await db.query(INSERT_TAGS, [ids]);
    await db.query(INSERT_TASKS, [ids, size.tasksPerUser]);
    await db.query(INSERT_TASK_TAGS, [ids]);
    await db.query(INSERT_ATTACHMENTS, [ids]);
    if (storedAttachmentCount) await db.query(UPDATE_ATTACHMENT_COUNT);
    const { members: projectMembers, projectIds } = await seedProjects(base, db, first.user.id, size);
    const [discussedProject] = projectIds;
    if (!discussedProject) throw new Error('no project was seeded');
    const discussedTask = await seedDiscussion(base, db, discussedProject, projectMembers, size.taskComments);
    await db.query('ANALYZE');
    const { rows: kept } = await db.query<{ owner_id: string; id: string; version: number }>(
      `SELECT owner_id, id, version FROM (
         SELECT owner_id, id, version, row_number() OVER (PARTITION BY owner_id ORDER BY created_at, id) AS n
         FROM tasks WHERE owner_id = ANY($1::uuid[])) AS t
       WHERE n <= $2 ORDER BY owner_id, n`,
      [ids, TASKS_KEPT],
    );
    const tasksOf = new Map<string, { id: string; version: number }[]>();
    for (const row of kept) {
      const list = tasksOf.get(row.owner_id) ?? [];
      list.push(row);
      tasksOf.set(row.owner_id, list);
    }
    const users = accounts.map((account) => ({
      ...account,
      password: USER_PASSWORD,
      tasks: (tasksOf.get(account.id) ?? []).map((task) => task.id),
    }));
    const { rows: ownTasks } = await db.query<{ id: string; version: number }>(
      'SELECT id, version FROM tasks WHERE owner_id = $1 ORDER BY created_at, id',
      [ids[0]],
    );
    return {
      users,
      loginAccounts,
      adminToken,
      projectMembers,
      discussedTask,
      ownTasks,
      storedAttachmentCount,
      seconds: (Date.now() - started) / 1000,
    };
  } finally {
    await db.end();
  }
}
