// Baseline (b), the stack's limit: bare node:http doing what the service must for the workloads of
// the table, with the same libraries and nothing else. Every request is authenticated as the service
// does it (stack-caller.ts), then:
//   GET /tasks/{id}    the task with its tags and attachment count (one query), visibility checked;
//   GET /tasks         one page of the keyset list and its rows (one statement, stack-list.ts);
//   POST /tasks        one statement: quota, task, outbox event, deliveries, NOTIFY (stack-writes.ts);
//   PATCH /tasks/{id}  one statement: visibility, If-Match, the change, event, deliveries, NOTIFY.
import { createServer } from 'node:http';
import pg from 'pg';
import { listenAndReport } from './listen.js';
import { callerCheck } from './stack-caller.js';
import { STACK_CONFIG_VARIABLE, StackConfigSchema } from './stack-config.js';
import { json, problem, readJson, type Answer } from './stack-http.js';
import { taskLists } from './stack-list.js';
import { readVisibleTask, serializeTask } from './stack-tasks.js';
import { taskWrites } from './stack-writes.js';

const config = StackConfigSchema.parse(JSON.parse(process.env[STACK_CONFIG_VARIABLE] ?? '{}'));
/**
 * Every statement named, so each connection parses and plans it once: as the service does on a
 * direct connection (server/db/sql.ts), and the best this stack can do.
 */
function preparing(pool: pg.Pool): pg.Pool {
  const names = new Map<string, string>();
  const query = (text: string, values?: unknown[]) => {
    const name = names.get(text) ?? `s${names.size + 1}`;
    names.set(text, name);
    return pool.query({ name, text, values });
  };
  return new Proxy(pool, {
    get: (target, property, receiver) => (property === 'query' ? query : Reflect.get(target, property, receiver)),
  });
}

const pool = preparing(new pg.Pool({ connectionString: config.databaseUrl, max: config.poolSize }));
// The row with the other worker count restarts the service, and with it the embedded server: the
// idle connections it closes are replaced on the next query (pg.Pool without this listener throws).
pool.on('error', () => {});
const callerOf = await callerCheck(config, pool);
const listTasks = taskLists(pool, config);
const writes = taskWrites(pool, config);

const TASK_PATH = /^\/tasks\/([0-9a-f-]{36})$/;

const server = createServer((req, res) => {
  const send = ({ status, body, headers }: Answer) => {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers });
    res.end(body);
  };
  (async (): Promise<Answer> => {
    const url = new URL(req.url ?? '/', 'http://stack.invalid');
    const taskId = TASK_PATH.exec(url.pathname)?.[1];
    const route = `${req.method ?? ''} ${taskId ? '/tasks/{id}' : url.pathname}`;
    if (!['GET /tasks/{id}', 'PATCH /tasks/{id}', 'GET /tasks', 'POST /tasks'].includes(route))
      return problem(404, 'Not Found');
    const caller = await callerOf(req.headers.authorization);
    if (!caller) return problem(401, 'Unauthorized');
    if (route === 'GET /tasks') return listTasks(caller, url);
    if (route === 'POST /tasks') return writes.create(caller, await readJson(req));
    if (!taskId) return problem(404, 'Not Found');
    if (route === 'PATCH /tasks/{id}')
      return writes.patch(caller, taskId, req.headers['if-match'], await readJson(req));
    const task = await readVisibleTask(pool, config, caller, taskId);
    return task ? json(200, serializeTask(task), { etag: `"${task.version}"` }) : problem(404, 'Not Found');
  })().then(send, () => send(problem(500, 'Internal Server Error')));
});
await listenAndReport(server);
