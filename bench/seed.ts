// Seeding, fast: users through the API (real password hashes and sessions), everything else in a
// few set-based INSERTs straight into the service's database, then ANALYZE.
import pg from 'pg';
import { register, login } from './api.js';
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

/** The project members (logged in), their projects, the projects' tags and tasks. */
async function seedProjects(
  base: string,
  db: pg.Client,
  firstUserId: string,
  size: SeedSize,
): Promise<{ id: string; token: string }[]> {
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
  return loggedIn;
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
    const projectMembers = await seedProjects(base, db, first.user.id, size);
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
      ownTasks,
      storedAttachmentCount,
      seconds: (Date.now() - started) / 1000,
    };
  } finally {
    await db.end();
  }
}
