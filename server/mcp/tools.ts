// MCP tools derived from the contract at start-up: one per operation an agent can use, its input one
// JSON Schema object of the operation's path parameters, query and body fields (and the If-Match and
// Idempotency-Key headers where it takes them), its output the success answer's schema.
import { isAppRoute, isAppRouteNoBody, isAppRouteOtherResponse, type AppRoute, type AppRouter } from '@ts-rest/core';
import { z } from 'zod';
import { zodToJsonSchema } from 'zod-to-json-schema';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { contract, isLoginOnly, isPublicRoute, scopeOf, type Scope } from '@task-service/client';
import { isCreatingPost } from '../http/idempotency.js';

export interface McpTool {
  /** What tools/list shows. */
  definition: Tool;
  route: AppRoute;
  /** The scope a personal access token needs to see and call the tool. */
  scope: Scope | undefined;
  pathParams: string[];
  queryFields: string[];
  takesBody: boolean;
}

/** A verb per router key where the key is not already one (`remove` → `delete`, `addToTask` → `add`). */
const VERBS: Record<string, string> = {
  remove: 'delete',
  listForTask: 'list',
  addToTask: 'add',
  removeFromTask: 'remove',
  listTasks: 'list',
  deliveries: 'list',
  changes: 'list',
  me: 'get',
  listMembers: 'list',
  addMember: 'add',
  updateMember: 'update',
  removeMember: 'delete',
};

/** `<resource>_<verb>` from the path's fixed segments: /tasks/:id/tags/:id + addToTask → `task_tags_add`. */
export function toolName(path: string, key: string): string {
  const verb = VERBS[key] ?? key;
  const words = path
    .split('/')
    .filter((segment) => segment !== '' && !segment.startsWith(':'))
    .map((segment) => segment.replace(/[^a-z]/gi, '').toLowerCase());
  if (words.at(-1) === verb) words.pop();
  const resource = words.map((word, i) => (i < words.length - 1 ? word.replace(/s$/, '') : word)).join('_');
  return `${resource}_${verb}`;
}

const JsonObjectSchema = z.object({
  properties: z.record(z.record(z.unknown())).default({}),
  required: z.array(z.string()).default([]),
});
type JsonObject = z.infer<typeof JsonObjectSchema>;

/** The JSON Schema of a zod object as a caller writes it (defaults optional, transforms' input). */
function jsonObjectOf(schema: unknown): JsonObject {
  if (!(schema instanceof z.ZodType)) return { properties: {}, required: [] };
  const json = zodToJsonSchema(schema, {
    $refStrategy: 'none',
    effectStrategy: 'input',
    pipeStrategy: 'input',
    removeAdditionalStrategy: 'strict',
  });
  return JsonObjectSchema.parse(json);
}

function outputSchemaOf(route: AppRoute): Tool['outputSchema'] {
  const success = Object.keys(route.responses)
    .map(Number)
    .filter((status) => status >= 200 && status < 300)
    .sort()[0];
  const declared = success === undefined ? undefined : route.responses[success];
  if (!(declared instanceof z.ZodObject)) return undefined;
  const { properties, required } = jsonObjectOf(declared);
  return { type: 'object', properties, required };
}

function headerDescription(route: AppRoute, name: string): string | undefined {
  const headers: unknown = route.headers;
  if (!(headers instanceof z.ZodObject)) return undefined;
  const field: unknown = headers.shape[name];
  return field instanceof z.ZodType ? field.description : undefined;
}

function annotationsOf(route: AppRoute): Tool['annotations'] {
  if (route.method === 'GET') return { readOnlyHint: true };
  if (route.method === 'DELETE') return { readOnlyHint: false, destructiveHint: true, idempotentHint: true };
  if (route.method === 'PUT') return { readOnlyHint: false, idempotentHint: true };
  return { readOnlyHint: false };
}

/** Operations an agent cannot use as a tool: public ones, token management and logout, uploads, downloads and streams. */
function servedAsTool(route: AppRoute): boolean {
  if (isPublicRoute(route) || isLoginOnly(route)) return false;
  if ('contentType' in route && route.contentType === 'multipart/form-data') return false;
  return !Object.values(route.responses).some((declared) => isAppRouteOtherResponse(declared));
}

function toolOf(route: AppRoute, key: string): McpTool {
  const path = jsonObjectOf(route.pathParams);
  const query = jsonObjectOf(route.query);
  const takesBody = route.method !== 'GET' && 'body' in route && !isAppRouteNoBody(route.body);
  const body = takesBody && 'body' in route ? jsonObjectOf(route.body) : { properties: {}, required: [] };
  const properties: Record<string, Record<string, unknown>> = {
    ...body.properties,
    ...query.properties,
    ...path.properties,
  };
  const required = [...path.required, ...query.required, ...body.required];
  const ifMatch = headerDescription(route, 'if-match');
  if (ifMatch !== undefined) properties.ifMatch = { type: 'string', description: `Sent as If-Match: ${ifMatch}` };
  if (isCreatingPost(route)) {
    properties.idempotencyKey = {
      type: 'string',
      minLength: 1,
      maxLength: 255,
      description:
        'Sent as Idempotency-Key: the same call again with the same key returns the first answer instead of creating twice',
    };
  }
  const outputSchema = outputSchemaOf(route);
  const name = toolName(route.path, key);
  return {
    definition: {
      name,
      description: route.summary ?? `${route.method} ${route.path}`,
      inputSchema: { type: 'object', properties, ...(required.length > 0 ? { required: [...new Set(required)] } : {}) },
      ...(outputSchema ? { outputSchema } : {}),
      annotations: annotationsOf(route),
    },
    route,
    scope: scopeOf(route),
    pathParams: Object.keys(path.properties),
    queryFields: Object.keys(query.properties),
    takesBody,
  };
}

function collect(router: AppRouter, into: McpTool[]): McpTool[] {
  for (const [key, entry] of Object.entries(router)) {
    if (!isAppRoute(entry)) collect(entry, into);
    else if (servedAsTool(entry)) into.push(toolOf(entry, key));
  }
  return into;
}

/** Every tool of the contract, by name. */
export function contractTools(): Map<string, McpTool> {
  const tools = collect(contract, []);
  const byName = new Map(tools.map((tool) => [tool.definition.name, tool]));
  if (byName.size !== tools.length) throw new Error('Two operations of the contract map to one MCP tool name');
  return byName;
}
