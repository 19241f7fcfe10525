// The consumer program for the typed client: what a browser app does with it. Compiled (strict,
// skipLibCheck: false) and bundled by test/client-weight.test.ts and `npm run bench -- --client`;
// openapi-fetch.ts is the same program for openapi-fetch. Type-level assertions: `same<A, B>()`.
import {
  createClient,
  isProblem,
  ok,
  ProblemError,
  type Problem,
  type ProblemCode,
  type Task,
} from '@task-service/client';

type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
const same = <A, B>(..._proof: Same<A, B> extends true ? [] : [never]): void => undefined;

export async function run(baseUrl: string, email: string, password: string): Promise<string[]> {
  const log: string[] = [];
  const client = createClient({ baseUrl });

  const login = await client.auth.login({ body: { email, password } });
  if (login.status === 401 || login.status === 429) throw new Error(`login failed: ${login.body.detail}`);
  log.push(`hello ${(await ok(login)).body.user.name}`);

  const created = await client.tasks.create({ body: { title: 'Write the report', priority: 'high' } });
  if (isProblem(created)) throw new Error(created.body.title);
  const task: Task = (await ok(created)).body;

  const listed = await client.tasks.list({
    query: { status: ['todo', 'in_progress'], priority: ['high', 'urgent'], sort: '-updatedAt', limit: 10 },
  });
  if (listed.status === 200) for (const item of listed.body.items) log.push(`${item.title} (${item.priority})`);

  const etag = `"${task.version}"`;
  const patched = await client.tasks.update({
    params: { task_id: task.id },
    headers: { 'if-match': etag },
    body: { status: 'done' },
  });
  if (patched.status !== 200) throw new Error(`patch failed with ${patched.status}`);
  same<typeof patched.body, Task>();
  log.push(`done at ${patched.body.completedAt ?? 'never'}`);

  // The same If-Match again: the task has moved on, so 412.
  const stale = await client.tasks.update({
    params: { task_id: task.id },
    headers: { 'if-match': etag },
    body: { title: 'Too late' },
  });
  if (stale.status === 412) {
    same<typeof stale.body, Problem>();
    log.push(`412 ${stale.body.code}`);
  }
  if (isProblem(stale)) {
    same<typeof stale.body.code, ProblemCode>();
    if (stale.body.code === 'precondition_failed') log.push(`stale: ${stale.body.detail}`);
  }

  const missing = await client.tasks.get({ params: { task_id: '00000000-0000-7000-8000-000000000000' } });
  // @ts-expect-error: before narrowing, the body may be a task, which has no code
  void missing.body.code;
  if (missing.status === 404) log.push(`404 ${missing.body.code} ${missing.body.requestId}`);
  else if (missing.status === 200) same<typeof missing.body, Task>();

  try {
    await ok(client.tasks.remove({ params: { task_id: '00000000-0000-7000-8000-000000000000' } }));
  } catch (error) {
    if (error instanceof ProblemError) {
      same<typeof error.problem, Problem>();
      log.push(`thrown ${error.problem.code}`);
    }
  }

  // Pagination: every page of the list, following nextCursor.
  let pages = 0;
  let items = 0;
  for await (const page of client.tasks.pages({ query: { limit: 2, sort: 'title' } })) {
    pages += 1;
    items += page.items.length;
    same<(typeof page.items)[number], Task>();
  }
  log.push(`${items} task(s) on ${pages} page(s)`);
  return log;
}
