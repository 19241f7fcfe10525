// The workloads of the table, as requests for the load generator. Set-up that needs the service
// (deep cursors, files to download) happens here, before any load.
import type { Attachment } from '../contract/attachments.js';
import { bearer, deepCursor, upload } from './api.js';
import type { LoadRequests } from './load/spec.js';
import type { BenchOptions } from './options.js';
import type { Seeded } from './seed.js';

export interface Workload {
  name: string;
  /** Compared with the argon2 baseline rather than the request baselines. */
  login?: boolean;
  requests: LoadRequests;
  /** A light load run alongside (the /healthz probe during the login storm). */
  probe?: LoadRequests;
  /** A floor under the measured window: 50 logins queue for seconds, and a shorter window sees no answer. */
  minSeconds?: number;
}

/** GET /tasks/{id} over many of the first user's tasks: the same requests for the service and the stack baseline. */
export function taskReads(seeded: Seeded, token: string): LoadRequests {
  const paths = seeded.ownTasks.slice(0, 1000).map((task) => `/tasks/${task.id}`);
  return { kind: 'rotate', method: 'GET', paths, headers: bearer(token) };
}

async function listWorkloads(base: string, seeded: Seeded, options: BenchOptions): Promise<Workload[]> {
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
      if (!firstPage && who === 'admin' && !options.everything) continue;
      const query = `sort=${sort}`;
      const path = `/tasks?limit=${options.pageLimit}${sort === '-createdAt' ? '' : `&${query}`}`;
      const sortName = sort === '-createdAt' ? '' : ` ${query}`;
      if (firstPage) workloads.push({ name: `GET /tasks${sortName} page 1 (${who})`, requests: { kind: 'rotate', method: 'GET', paths: [path], headers: bearer(token) } });
      const deep = await deepCursor(base, token, query, options.deepPage, options.pageLimit);
      const deepPath = deep.cursor ? `${path}&cursor=${deep.cursor}` : path;
      workloads.push({ name: `GET /tasks${sortName} page ${deep.page} (${who})`, requests: { kind: 'rotate', method: 'GET', paths: [deepPath], headers: bearer(token) } });
    }
  }
  return workloads;
}

export async function buildWorkloads(base: string, seeded: Seeded, options: BenchOptions): Promise<Workload[]> {
  const [user] = seeded.users;
  if (!user) throw new Error('no users were seeded');
  const auth = bearer(user.token);
  // Disjoint tasks: an upload changes its task's version, which the PATCH workload must know.
  const patchTasks = seeded.ownTasks.slice(0, options.connections * 4);
  const uploadTasks = seeded.ownTasks.slice(options.connections * 4, options.connections * 4 + 500);
  const downloads: Attachment[] = [];
  for (const task of uploadTasks.slice(0, 10)) downloads.push(await upload(base, user.token, task.id, options.uploadBytes));
  const logins = seeded.loginAccounts.map(({ email, password }) => ({ kind: 'json' as const, value: JSON.stringify({ email, password }) }));
  return [
    { name: 'GET /tasks/{id}', requests: taskReads(seeded, user.token) },
    ...(await listWorkloads(base, seeded, options)),
    {
      name: 'POST /tasks',
      requests: { kind: 'rotate', method: 'POST', paths: ['/tasks'], bodies: [{ kind: 'json', value: JSON.stringify({ title: 'Bench task', priority: 'high' }) }], headers: auth },
    },
    { name: 'PATCH /tasks/{id} (If-Match)', requests: { kind: 'patch', tasks: patchTasks, headers: auth } },
    {
      name: 'POST /auth/login',
      login: true,
      minSeconds: 10,
      requests: { kind: 'rotate', method: 'POST', paths: ['/auth/login'], bodies: logins },
      probe: { kind: 'rotate', method: 'GET', paths: ['/healthz'] },
    },
    {
      name: `POST /tasks/{id}/attachments (${options.uploadBytes / 1024} KiB)`,
      requests: { kind: 'rotate', method: 'POST', paths: uploadTasks.map((task) => `/tasks/${task.id}/attachments`), bodies: [{ kind: 'file', bytes: options.uploadBytes }], headers: auth },
    },
    {
      name: `GET /attachments/{id}/content (${options.uploadBytes / 1024} KiB)`,
      requests: { kind: 'rotate', method: 'GET', paths: downloads.map((file) => `/attachments/${file.id}/content`), headers: auth },
    },
  ];
}
