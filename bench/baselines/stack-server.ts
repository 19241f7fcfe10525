// Baseline (b), the stack's limit: bare node:http doing what the service does for the workloads of
// the table, with the same libraries (jose, pg) and nothing else. Every request is authenticated as
// the service does it (stack-caller.ts: the token verified once and kept, the live session read),
// then:
//   GET /tasks/{id}    the visible task as the API shows it: the service's own statement (stack-tasks.ts);
//   GET /tasks         one page of the keyset list and its rows (one statement, stack-list.ts);
//   POST /tasks        one round trip: the user's row shared, then in a subtransaction the quota
//                      from the holdings counters, the task, its event, deliveries; the event placed;
//                      NOTIFY after the commit (stack-writes.ts);
//   PATCH /tasks/{id}  one round trip: the task's row locked, then in a subtransaction visibility,
//                      If-Match, the change, its event, deliveries; the event placed; NOTIFY after;
//   GET /tasks/{id}/comments, GET /tasks/{id}/activity
//                      the task under the visibility rule, then the page (two statements, stack-comments.ts).
import { createServer } from 'node:http';
import { v7 as uuidv7 } from 'uuid';
import { listenAndReport } from './listen.js';
import { callerCheck } from './stack-caller.js';
import { STACK_CONFIG_VARIABLE, StackConfigSchema } from './stack-config.js';
import { stackDb } from './stack-db.js';
import { taskHistory } from './stack-comments.js';
import { json, problem, readJson, type Answer } from './stack-http.js';
import { taskLists } from './stack-list.js';
import { readShownTask } from './stack-tasks.js';
import { taskWrites } from './stack-writes.js';

const config = StackConfigSchema.parse(JSON.parse(process.env[STACK_CONFIG_VARIABLE] ?? '{}'));
const db = stackDb(config.databaseUrl, config.poolSize);
const callerOf = await callerCheck(config, db);
const listTasks = taskLists(db, config);
const writes = await taskWrites(db, config);
const history = taskHistory(db);

const TASK_PATH = /^\/tasks\/([0-9a-f-]{36})$/;
const HISTORY_PATH = /^\/tasks\/([0-9a-f-]{36})\/(comments|activity)$/;

const server = createServer((req, res) => {
  const send = ({ status, body, headers }: Answer) => {
    // The headers the service sends on every answer (server/http/middleware.ts): a request id, no caching.
    res.writeHead(status, {
      'content-type': 'application/json; charset=utf-8',
      'x-request-id': uuidv7(),
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
      ...headers,
    });
    res.end(body);
  };
  (async (): Promise<Answer> => {
    const url = new URL(req.url ?? '/', 'http://stack.invalid');
    const [, historyOf, list] = HISTORY_PATH.exec(url.pathname) ?? [];
    if (req.method === 'GET' && historyOf) {
      const caller = await callerOf(req.headers.authorization);
      if (!caller) return problem(401, 'Unauthorized');
      return list === 'comments' ? history.comments(caller, historyOf, url) : history.activity(caller, historyOf, url);
    }
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
    const task = await readShownTask(db, config, caller, taskId);
    return task ? json(200, task, { etag: `"${task.version}"` }) : problem(404, 'Not Found');
  })().then(send, () => send(problem(500, 'Internal Server Error')));
});
await listenAndReport(server);
