import { initServer } from '@ts-rest/express';
import { projectsContract } from '@task-service/client';
import type { AppContext } from '../context.js';
import { entityTag } from '../http/etags.js';
import { principalOf } from '../http/principal.js';
import { serializeMember, serializeProject } from './serialize.js';
import {
  addMember,
  changeMember,
  changeProject,
  createProject,
  deleteProject,
  findVisibleProject,
  listMembers,
  listProjects,
  removeMember,
} from './service.js';

export function projectsRouter(ctx: AppContext) {
  return initServer().router(projectsContract, {
    list: async ({ query, req, res }) => ({
      status: 200,
      body: await listProjects(ctx, principalOf(req), query, { req, res }),
    }),

    create: async ({ body, req, res }) => {
      const project = await createProject(ctx, principalOf(req), body);
      res.setHeader('Location', `/projects/${project.id}`);
      res.setHeader('ETag', entityTag(project.version));
      return { status: 201, body: serializeProject(project) };
    },

    get: async ({ params, req, res }) => {
      const project = await findVisibleProject(ctx, principalOf(req), params.project_id);
      res.setHeader('ETag', entityTag(project.version));
      return { status: 200, body: serializeProject(project) };
    },

    update: async ({ params, headers, body, req, res }) => {
      const project = await changeProject(ctx, principalOf(req), params.project_id, headers['if-match'], body);
      res.setHeader('ETag', entityTag(project.version));
      return { status: 200, body: serializeProject(project) };
    },

    remove: async ({ params, headers, req }) => {
      await deleteProject(ctx, principalOf(req), params.project_id, headers['if-match']);
      return { status: 204, body: undefined };
    },

    listMembers: async ({ params, query, req, res }) => ({
      status: 200,
      body: await listMembers(ctx, principalOf(req), params.project_id, query, { req, res }),
    }),

    addMember: async ({ params, body, req, res }) => {
      const member = await addMember(ctx, principalOf(req), params.project_id, body);
      res.setHeader('Location', `/projects/${params.project_id}/members/${member.userId}`);
      return { status: 201, body: serializeMember(member) };
    },

    updateMember: async ({ params, body, req }) => ({
      status: 200,
      body: serializeMember(await changeMember(ctx, principalOf(req), params.project_id, params.user_id, body)),
    }),

    removeMember: async ({ params, req }) => {
      await removeMember(ctx, principalOf(req), params.project_id, params.user_id);
      return { status: 204, body: undefined };
    },
  });
}
