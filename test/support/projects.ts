import { v7 as uuidv7 } from 'uuid';
import { ProjectSchema, type Project } from '../../contract/projects.js';
import type { TestService } from './app.js';
import type { TestUser } from './users.js';

type Caller = Pick<TestUser, 'auth'>;

/** Creates a project over HTTP, the caller its admin; `body` adds to (or replaces) a unique name. */
export async function createProject(
  service: TestService,
  user: Caller,
  body: Record<string, unknown> = {},
): Promise<Project> {
  const res = await service.http
    .post('/projects')
    .set('Authorization', user.auth)
    .send({ name: `project-${uuidv7().slice(-6)}`, ...body })
    .expect(201);
  return ProjectSchema.parse(res.body);
}

/** `by` adds `user` to the project with `role`: the request, for the caller to expect its answer. */
export const addMember = (
  service: TestService,
  by: Caller,
  projectId: string,
  user: Pick<TestUser, 'user'>,
  role: string,
) =>
  service.http
    .post(`/projects/${projectId}/members`)
    .set('Authorization', by.auth)
    .send({ userId: user.user.id, role });
