import { initContract } from '@ts-rest/core';
import { generateOpenApi } from '@ts-rest/open-api';
import { z } from 'zod';
import {
  AttachmentSchema,
  AuthResultSchema,
  HealthSchema,
  JwksSchema,
  listOf,
  LoginSchema,
  OpenApiDocumentSchema,
  pageOf,
  ProblemSchema,
  ReadinessSchema,
  RefreshSchema,
  RegisterSchema,
  TagCreateSchema,
  TagPatchSchema,
  TagRefSchema,
  TagSchema,
  TaskCreateSchema,
  TaskPatchSchema,
  TaskReplaceSchema,
  TaskSchema,
  UserCreateSchema,
  UserPatchSchema,
  UserReplaceSchema,
  UserSchema,
  ValidationIssueSchema,
} from '@task-service/client';

export type OpenApiDocument = ReturnType<typeof generateOpenApi>;
export type SchemaObject = NonNullable<NonNullable<OpenApiDocument['components']>['schemas']>[string];
/** A schema written out, not a $ref. */
export type JsonSchema = Exclude<SchemaObject, { $ref: string }>;

const probeContract = initContract();

const INT32 = { minimum: -(2 ** 31), maximum: 2 ** 31 - 1 };
const UnformattedIntegerSchema = z
  .object({
    type: z.literal('integer'),
    format: z.undefined(),
    minimum: z.number().optional(),
    maximum: z.number().optional(),
  })
  .passthrough();
/** A JSON.parse reviver that gives integers the format their bounds allow (int64 when unbounded). */
function withIntegerFormat(_key: string, value: unknown): unknown {
  // Called for every value of the document: the others are passed over without zod's failed parse.
  if (typeof value !== 'object' || value === null || !('type' in value) || value.type !== 'integer') return value;
  const integer = UnformattedIntegerSchema.safeParse(value);
  if (!integer.success) return value;
  const { minimum = -Infinity, maximum = Infinity } = integer.data;
  return { ...integer.data, format: minimum >= INT32.minimum && maximum <= INT32.maximum ? 'int32' : 'int64' };
}

/** The document with every integer's format set. */
export const withIntegerFormats = (document: OpenApiDocument): OpenApiDocument =>
  JSON.parse(JSON.stringify(document), withIntegerFormat);

/**
 * The generator renders `z.unknown()` as `{ nullable: true }`, which OpenAPI 3.0.3 leaves meaningless
 * without a `type` (and validators refuse when checking an example); `{}` says "any value".
 */
const anyValue = (_key: string, value: unknown): unknown => {
  if (typeof value !== 'object' || value === null) return value;
  if (JSON.stringify(value) === '{"nullable":true}') return {};
  // A union with a nullable member: the generator marks the `oneOf` itself nullable, which 3.0.3
  // leaves meaningless without a `type`; the member still says null is allowed.
  if ('oneOf' in value && 'nullable' in value && !('type' in value))
    return Object.fromEntries(Object.entries(value).filter(([key]) => key !== 'nullable'));
  return value;
};
export const withAnyValueSchemas = (document: OpenApiDocument): OpenApiDocument =>
  JSON.parse(JSON.stringify(document), anyValue);

/** The generator's own rendering of one zod schema: as a request body reads it, or as a response. */
export function schemaOf(schema: z.ZodTypeAny, side: 'request' | 'response'): SchemaObject {
  const router = probeContract.router({
    probe: { method: 'POST', path: '/probe', body: schema, responses: { 200: schema } },
  });
  const operation = generateOpenApi(router, { info: { title: 'probe', version: '0' } }).paths['/probe'].post;
  const media =
    side === 'request'
      ? operation.requestBody.content['application/json']
      : operation.responses['200'].content['application/json'];
  return JSON.parse(JSON.stringify(media.schema), withIntegerFormat);
}

// Named in components/schemas, so the reference shows models rather than the same object inlined
// everywhere. A model comes after the models it contains.
const responseModels: Record<string, z.ZodTypeAny> = {
  ValidationIssue: ValidationIssueSchema,
  Problem: ProblemSchema,
  User: UserSchema,
  UserPage: pageOf(UserSchema),
  AuthResult: AuthResultSchema,
  TagRef: TagRefSchema,
  Task: TaskSchema,
  TaskPage: pageOf(TaskSchema),
  Tag: TagSchema,
  TagPage: pageOf(TagSchema),
  TagList: listOf(TagSchema),
  Attachment: AttachmentSchema,
  AttachmentList: listOf(AttachmentSchema),
  Health: HealthSchema,
  Readiness: ReadinessSchema,
  Jwks: JwksSchema,
  OpenApiDocument: OpenApiDocumentSchema,
};
const requestModels: Record<string, z.ZodTypeAny> = {
  RegisterRequest: RegisterSchema,
  LoginRequest: LoginSchema,
  RefreshRequest: RefreshSchema,
  UserCreate: UserCreateSchema,
  UserReplace: UserReplaceSchema,
  UserPatch: UserPatchSchema,
  TaskCreate: TaskCreateSchema,
  TaskReplace: TaskReplaceSchema,
  TaskPatch: TaskPatchSchema,
  TagCreate: TagCreateSchema,
  TagPatch: TagPatchSchema,
};

/** A schema's JSON without its own description: a field described where it is used is still a copy of its model. */
const shapeOf = (value: object): string =>
  JSON.stringify(Object.fromEntries(Object.entries(value).filter(([key]) => key !== 'description')));
const descriptionOf = (value: object): unknown => Object.entries(value).find(([key]) => key === 'description')?.[1];

interface NamedModel {
  name: string;
  description: unknown;
}

/**
 * A JSON.parse reviver (bottom-up) that turns every copy of a named model below the root into a $ref;
 * a copy with a description of its own keeps it beside the reference (`allOf`, as OpenAPI 3.0 ignores
 * siblings of a $ref).
 */
const referencing = (names: Map<string, NamedModel>) => (key: string, value: unknown) => {
  const model =
    key !== '' && typeof value === 'object' && value !== null && !Array.isArray(value)
      ? names.get(shapeOf(value))
      : undefined;
  if (!model || typeof value !== 'object' || value === null) return value;
  const $ref = `#/components/schemas/${model.name}`;
  const description = descriptionOf(value);
  return description === undefined || description === model.description ? { $ref } : { description, allOf: [{ $ref }] };
};

/** Moves the contract's models into components/schemas and points every use of one at it. */
export function withNamedModels(document: OpenApiDocument): OpenApiDocument {
  const names = new Map<string, NamedModel>();
  const schemas: Record<string, SchemaObject> = {};
  const name = (model: string, schema: SchemaObject) => {
    const reduced: SchemaObject = JSON.parse(JSON.stringify(schema), referencing(names));
    schemas[model] = reduced;
    names.set(shapeOf(reduced), { name: model, description: descriptionOf(reduced) });
  };
  for (const [model, schema] of Object.entries(responseModels)) name(model, schemaOf(schema, 'response'));
  for (const [model, schema] of Object.entries(requestModels)) name(model, schemaOf(schema, 'request'));
  const referenced: OpenApiDocument = JSON.parse(JSON.stringify(document), referencing(names));
  return {
    ...referenced,
    components: { ...referenced.components, schemas: { ...referenced.components?.schemas, ...schemas } },
  };
}
