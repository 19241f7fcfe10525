// The workloads of the table, as requests for the load generator. Set-up that needs the service
// (deep cursors, files to download) happens here, before any load. The load is spread as users
// spread it: every request is sent as one of the seeded users drawn at random, for one of that
// user's tasks (or pages) drawn at random.
import { randomBytes } from 'node:crypto';
import type { Attachment } from '../contract/attachments.js';
import { bearer, deepCursor, upload } from './api.js';
import type { LoadRequests } from './load/spec.js';
import type { BenchOptions } from './options.js';
import type { BenchUser, Seeded } from './seed.js';
import { TARGETS } from './targets.js';

/** Requests as they are, or made afresh for each turn (a PATCH load starts from the versions its tasks have then). */
export type TurnRequests = LoadRequests | (() => Promise<LoadRequests>);

export interface Workload {
  name: string;
  /** Compared with the argon2 baseline rather than the request baselines. */
  login?: boolean;
  requests: TurnRequests;
  /** A light load run alongside (the /healthz probe during the login storm). */
  probe?: LoadRequests;
  /** A floor under the measured window: 50 logins queue for seconds, and a shorter window sees no answer. */
  minSeconds?: number;
  /** The same work on the stack baseline (the bare twin), and the share of its req/s the service should reach. */
  bare?: { requests: TurnRequests; target: number };
}

/** Where the workloads are sent: the service, and the stack baseline serving the same routes. */
export interface Targets {
  service: string;
  bare: string;
}

/** The current versions of tasks, read from the database (the start of each PATCH turn). */
export type Versions = (ids: string[]) => Promise<Map<string, number>>;

/** Tasks of each user patched by the spread PATCH row: the service's and the twin's are disjoint. */
const PATCHED_PER_USER = 8;

/** GET /tasks/{id} of the first user's tasks: the runtime baseline's requests (it answers any path alike). */
export function taskReads(seeded: Seeded, token: string): LoadRequests {
  const paths = seeded.ownTasks.slice(0, 1000).map((task) => `/tasks/${task.id}`);
  return { kind: 'rotate', method: 'GET', paths, headers: bearer(token) };
}

/** GET /tasks/{id}: a random user, one of their tasks at random; the same requests for the service and its twin. */
function spreadReads(seeded: Seeded): LoadRequests {
  return {
    kind: 'spread',
    method: 'GET',
    users: seeded.users.map((user) => ({ headers: bearer(user.token), paths: user.tasks.map((id) => `/tasks/${id}`) })),
  };
}

/** At most `limit` of `work` at once. */
async function inBatches<T, R>(items: T[], limit: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = [];
  for (let i = 0; i < items.length; i += limit)
    results.push(...(await Promise.all(items.slice(i, i + limit).map(work))));
  return results;
}

/**
 * One page of each caller's list (page 1, or a deep page found once by following `nextCursor`:
 * each server signs its own cursors), asked for over and over as a random caller. A list shorter
 * than the page is asked for its last page; the page reached is the shallowest of the callers'.
 */
async function listPages(
  base: string,
  callers: { token: string }[],
  sort: string,
  page: number | 'first',
  options: BenchOptions,
): Promise<{ requests: LoadRequests; page: number }> {
  const path = `/tasks?limit=${options.pageLimit}${sort === '-createdAt' ? '' : `&sort=${sort}`}`;
  const pages = await inBatches(callers, 5, async ({ token }) => {
    if (page === 'first') return { token, path, page: 1 };
    const deep = await deepCursor(base, token, `/tasks?sort=${sort}`, page, options.pageLimit);
    return { token, path: deep.cursor ? `${path}&cursor=${deep.cursor}` : path, page: deep.page };
  });
  return {
    requests: {
      kind: 'spread',
      method: 'GET',
      users: pages.map(({ token, path: at }) => ({ headers: bearer(token), paths: [at] })),
    },
    page: Math.min(...pages.map((p) => p.page)),
  };
}

/**
 * Page 1 and page 50 of the default sort over the users, and over the members of the seeded
 * projects (each list the merge of one index scan per project); the admin's and other sorts' in full runs.
 */
async function listWorkloads(targets: Targets, seeded: Seeded, options: BenchOptions): Promise<Workload[]> {
  const groups = [
    { who: '', callers: seeded.users, quick: true },
    { who: ` (member of ${options.seed.projects} projects)`, callers: seeded.projectMembers, quick: true },
    { who: ' (admin)', callers: [{ token: seeded.adminToken }], quick: false },
  ];
  const lists = [
    { sort: '-createdAt', firstPage: true },
    { sort: 'title', firstPage: false },
    { sort: 'dueAt', firstPage: false },
  ];
  const workloads: Workload[] = [];
  for (const { sort, firstPage } of lists) {
    for (const { who, callers, quick } of groups) {
      if ((!quick || sort !== '-createdAt') && !options.everything) continue;
      const sortName = sort === '-createdAt' ? '' : ` sort=${sort}`;
      for (const page of firstPage ? (['first', options.deepPage] as const) : [options.deepPage]) {
        const service = await listPages(targets.service, callers, sort, page, options);
        const bare = await listPages(targets.bare, callers, sort, page, options);
        if (bare.page !== service.page)
          throw new Error(`the stack baseline's list ends at page ${bare.page}, the service's at ${service.page}`);
        workloads.push({
          name: `GET /tasks${sortName} page ${service.page}${who}`,
          requests: service.requests,
          bare: { requests: bare.requests, target: TARGETS.list },
        });
      }
    }
  }
  return workloads;
}

/**
 * Page 1 and page 50 of the discussed task's comments (oldest first) and of its activity (newest
 * first), as a random one of the project members who read it. A deep page's cursor is found once on
 * each server (each signs its own; a cursor of these lists names a comment or an entry, not a reader).
 */
async function historyWorkloads(targets: Targets, seeded: Seeded, options: BenchOptions): Promise<Workload[]> {
  const task = seeded.discussedTask;
  const [reader] = seeded.projectMembers;
  if (!reader) throw new Error('no project member reads the discussed task');
  const lists = [
    { list: 'comments', size: `${task.comments.toLocaleString('en-US')} comments` },
    { list: 'activity', size: `${task.activity.toLocaleString('en-US')} entries` },
  ];
  const pageOn = async (base: string, list: string, page: number | 'first') => {
    const path = `/tasks/${task.id}/${list}?limit=${options.pageLimit}`;
    const deep =
      page === 'first'
        ? { cursor: undefined, page: 1 }
        : await deepCursor(base, reader.token, `/tasks/${task.id}/${list}`, page, options.pageLimit);
    const at = deep.cursor ? `${path}&cursor=${deep.cursor}` : path;
    const requests: LoadRequests = {
      kind: 'spread',
      method: 'GET',
      users: seeded.projectMembers.map((member) => ({ headers: bearer(member.token), paths: [at] })),
    };
    return { requests, page: deep.page };
  };
  const workloads: Workload[] = [];
  for (const { list, size } of lists)
    for (const page of ['first', options.deepPage] as const) {
      const service = await pageOn(targets.service, list, page);
      const bare = await pageOn(targets.bare, list, page);
      if (bare.page !== service.page)
        throw new Error(`the stack baseline's ${list} end at page ${bare.page}, the service's at ${service.page}`);
      workloads.push({
        name: `GET /tasks/{id}/${list} page ${service.page} (${size})`,
        requests: service.requests,
        bare: { requests: bare.requests, target: TARGETS.list },
      });
    }
  return workloads;
}

/** PATCH with If-Match over `pick` of each user's tasks, each turn from the versions they have then. */
function spreadPatches(users: BenchUser[], pick: (user: BenchUser) => string[], versions: Versions) {
  const tasks = users.flatMap((user, index) => pick(user).map((id) => ({ id, user: index })));
  return async (): Promise<LoadRequests> => {
    const known = await versions(tasks.map((task) => task.id));
    return {
      kind: 'patch',
      users: users.map((user) => ({ headers: bearer(user.token) })),
      tasks: tasks.map((task) => ({ ...task, version: known.get(task.id) ?? 1 })),
    };
  };
}

/** PATCH without If-Match of one task by every connection at once, each request a title no write has set. */
function hotPatches(user: BenchUser, taskId: string) {
  return async (): Promise<LoadRequests> => {
    const turn = randomBytes(4).toString('hex');
    return {
      kind: 'spread',
      method: 'PATCH',
      users: [{ headers: bearer(user.token), paths: [`/tasks/${taskId}`] }],
      bodies: Array.from({ length: 1000 }, (_, n) => ({
        kind: 'json' as const,
        value: JSON.stringify({ title: `Hot ${turn}-${n}` }),
      })),
    };
  };
}

export async function buildWorkloads(
  targets: Targets,
  seeded: Seeded,
  options: BenchOptions,
  versions: Versions,
): Promise<Workload[]> {
  const [user] = seeded.users;
  if (!user) throw new Error('no users were seeded');
  if (seeded.users.some((u) => u.tasks.length < 4 * PATCHED_PER_USER))
    throw new Error(`too few tasks per user for the PATCH workloads (${4 * PATCHED_PER_USER} needed)`);
  const auth = bearer(user.token);
  // The uploads' tasks are the first user's last ones: an upload changes its task's version,
  // which the PATCH loads read at each turn anyway, and no other row touches them.
  const uploadTasks = seeded.ownTasks.slice(-500);
  const downloads: Attachment[] = [];
  if (options.everything)
    for (const task of uploadTasks.slice(0, 10))
      downloads.push(await upload(targets.service, user.token, task.id, options.uploadBytes));
  const logins = seeded.loginAccounts.map(({ email, password }) => ({
    kind: 'json' as const,
    value: JSON.stringify({ email, password }),
  }));
  const create: LoadRequests = {
    kind: 'spread',
    method: 'POST',
    users: seeded.users.map((u) => ({ headers: bearer(u.token), paths: ['/tasks'] })),
    bodies: [{ kind: 'json', value: JSON.stringify({ title: 'Bench task', priority: 'high' }) }],
  };
  const hot = seeded.users[1] ?? user;
  const [hotTask, bareHotTask] = hot.tasks.slice(-2);
  if (!hotTask || !bareHotTask) throw new Error('no task to patch');
  const files: Workload[] = [
    {
      name: `POST /tasks/{id}/attachments (${options.uploadBytes / 1024} KiB)`,
      requests: {
        kind: 'rotate',
        method: 'POST',
        paths: uploadTasks.map((task) => `/tasks/${task.id}/attachments`),
        bodies: [{ kind: 'file', bytes: options.uploadBytes }],
        headers: auth,
      },
    },
    {
      name: `GET /attachments/{id}/content (${options.uploadBytes / 1024} KiB)`,
      requests: {
        kind: 'rotate',
        method: 'GET',
        paths: downloads.map((file) => `/attachments/${file.id}/content`),
        headers: auth,
      },
    },
  ];
  return [
    {
      name: 'GET /tasks/{id}',
      requests: spreadReads(seeded),
      bare: { requests: spreadReads(seeded), target: TARGETS.read },
    },
    ...(await listWorkloads(targets, seeded, options)),
    ...(await historyWorkloads(targets, seeded, options)),
    { name: 'POST /tasks', requests: create, bare: { requests: create, target: TARGETS.create } },
    {
      name: 'PATCH /tasks/{id} (If-Match, spread)',
      requests: spreadPatches(seeded.users, (u) => u.tasks.slice(0, PATCHED_PER_USER), versions),
      bare: {
        requests: spreadPatches(seeded.users, (u) => u.tasks.slice(PATCHED_PER_USER, 2 * PATCHED_PER_USER), versions),
        target: TARGETS.patch,
      },
    },
    {
      name: `PATCH /tasks/{id} (${options.connections} writers, one task)`,
      requests: hotPatches(hot, hotTask),
      bare: { requests: hotPatches(hot, bareHotTask), target: TARGETS.patch },
    },
    {
      name: 'POST /auth/login',
      login: true,
      minSeconds: 8,
      requests: { kind: 'rotate', method: 'POST', paths: ['/auth/login'], bodies: logins },
      probe: { kind: 'rotate', method: 'GET', paths: ['/healthz'] },
    },
    // Not in the targets' table: full runs only.
    ...(options.everything ? files : []),
  ];
}
