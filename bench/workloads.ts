// The workloads of the table, as requests for the load generator. Set-up that needs the service
// (deep cursors, files to download) happens here, before any load.
import type { Attachment } from '../contract/attachments.js';
import { bearer, deepCursor, upload } from './api.js';
import type { LoadRequests } from './load/spec.js';
import type { BenchOptions } from './options.js';
import type { Seeded } from './seed.js';
import { TARGETS } from './targets.js';

export interface Workload {
  name: string;
  /** Compared with the argon2 baseline rather than the request baselines. */
  login?: boolean;
  requests: LoadRequests;
  /** A light load run alongside (the /healthz probe during the login storm). */
  probe?: LoadRequests;
  /** A floor under the measured window: 50 logins queue for seconds, and a shorter window sees no answer. */
  minSeconds?: number;
  /** The same work on the stack baseline (the bare handler), and the share of its req/s the service should reach. */
  bare?: { requests: LoadRequests; target: number };
}

/** Where the workloads are sent: the service, and the stack baseline serving the same routes. */
export interface Targets {
  service: string;
  bare: string;
}

/** GET /tasks/{id} over many of the first user's tasks: the same requests for the service and the stack baseline. */
export function taskReads(seeded: Seeded, token: string): LoadRequests {
  const paths = seeded.ownTasks.slice(0, 1000).map((task) => `/tasks/${task.id}`);
  return { kind: 'rotate', method: 'GET', paths, headers: bearer(token) };
}

/** One page asked over and over; a deep page's cursor is each server's own (both sign their cursors). */
async function listPage(
  base: string,
  token: string,
  sort: string,
  page: number | 'first',
  options: BenchOptions,
): Promise<{ requests: LoadRequests; page: number }> {
  const path = `/tasks?limit=${options.pageLimit}${sort === '-createdAt' ? '' : `&sort=${sort}`}`;
  const requests = (at: string): LoadRequests => ({
    kind: 'rotate',
    method: 'GET',
    paths: [at],
    headers: bearer(token),
  });
  if (page === 'first') return { requests: requests(path), page: 1 };
  const deep = await deepCursor(base, token, `sort=${sort}`, page, options.pageLimit);
  return { requests: requests(deep.cursor ? `${path}&cursor=${deep.cursor}` : path), page: deep.page };
}

/** Page 1 and a deep page of the default sort for a user; the admin's and other sorts' in full runs. */
async function listWorkloads(targets: Targets, seeded: Seeded, options: BenchOptions): Promise<Workload[]> {
  const user = seeded.users[0];
  if (!user) throw new Error('no users were seeded');
  const callers = [
    { who: 'user', token: user.token },
    { who: 'admin', token: seeded.adminToken },
  ];
  const lists = [
    { sort: '-createdAt', firstPage: true },
    { sort: 'title', firstPage: false },
    { sort: 'dueAt', firstPage: false },
  ];
  const workloads: Workload[] = [];
  for (const { sort, firstPage } of lists) {
    for (const { who, token } of callers) {
      if ((who === 'admin' || sort !== '-createdAt') && !options.everything) continue;
      const sortName = sort === '-createdAt' ? '' : ` sort=${sort}`;
      for (const page of firstPage ? (['first', options.deepPage] as const) : [options.deepPage]) {
        const service = await listPage(targets.service, token, sort, page, options);
        const bare = await listPage(targets.bare, token, sort, page, options);
        if (bare.page !== service.page)
          throw new Error(`the stack baseline's list ends at page ${bare.page}, the service's at ${service.page}`);
        workloads.push({
          name: `GET /tasks${sortName} page ${service.page} (${who})`,
          requests: service.requests,
          bare: { requests: bare.requests, target: TARGETS.list },
        });
      }
    }
  }
  return workloads;
}

export async function buildWorkloads(targets: Targets, seeded: Seeded, options: BenchOptions): Promise<Workload[]> {
  const [user] = seeded.users;
  if (!user) throw new Error('no users were seeded');
  const auth = bearer(user.token);
  // Disjoint tasks: an upload changes its task's version, which the PATCH workload must know, and
  // the stack baseline patches tasks of its own, as many, each at version 1 like the service's.
  const patched = options.connections * 4;
  const patchTasks = seeded.ownTasks.slice(0, patched);
  const uploadTasks = seeded.ownTasks.slice(patched, patched + 500);
  const barePatchTasks = seeded.ownTasks.slice(patched + 500, 2 * patched + 500);
  if (barePatchTasks.length < patched)
    throw new Error(`too few tasks per user for the PATCH workloads (${2 * patched + 500} needed)`);
  const downloads: Attachment[] = [];
  if (options.everything)
    for (const task of uploadTasks.slice(0, 10))
      downloads.push(await upload(targets.service, user.token, task.id, options.uploadBytes));
  const logins = seeded.loginAccounts.map(({ email, password }) => ({
    kind: 'json' as const,
    value: JSON.stringify({ email, password }),
  }));
  const create: LoadRequests = {
    kind: 'rotate',
    method: 'POST',
    paths: ['/tasks'],
    bodies: [{ kind: 'json', value: JSON.stringify({ title: 'Bench task', priority: 'high' }) }],
    headers: auth,
  };
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
      requests: taskReads(seeded, user.token),
      bare: { requests: taskReads(seeded, user.token), target: TARGETS.read },
    },
    ...(await listWorkloads(targets, seeded, options)),
    { name: 'POST /tasks', requests: create, bare: { requests: create, target: TARGETS.create } },
    {
      name: 'PATCH /tasks/{id} (If-Match)',
      requests: { kind: 'patch', tasks: patchTasks, headers: auth },
      bare: { requests: { kind: 'patch', tasks: barePatchTasks, headers: auth }, target: TARGETS.patch },
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
