import { expect } from 'vitest';
import { TaskSchema, type Task, type TaskCreate } from '../../contract/tasks.js';
import type { TestService } from './app.js';
import type { TestUser } from './users.js';

type Caller = Pick<TestUser, 'auth'>;

/** Creates a task over HTTP; `body` adds to (or replaces) a default title. */
export async function createTask(service: TestService, user: Caller, body: Partial<TaskCreate> = {}): Promise<Task> {
  const res = await service.http
    .post('/tasks')
    .set('Authorization', user.auth)
    .send({ title: 'A task', ...body })
    .expect(201);
  return TaskSchema.parse(res.body);
}

/** Reads a task the user can see, checking that its ETag names its version. */
export async function getTask(service: TestService, user: Caller, id: string): Promise<Task> {
  const res = await service.http.get(`/tasks/${id}`).set('Authorization', user.auth).expect(200);
  const task = TaskSchema.parse(res.body);
  expect(res.headers.etag).toBe(`"${task.version}"`);
  return task;
}
