import { initContract, type AppRoute } from '@ts-rest/core';
import { z } from 'zod';
import { PROBLEM_CODES } from './problem-codes.js';

// Annotated: without it the declaration emit fails (TS4023, a type ts-rest does not export).
export const c: ReturnType<typeof initContract> = initContract();

/**
 * A schema typed by the name of what it parses: declaration files then say `Named<Task>` wherever the
 * contract uses it, instead of spelling the whole schema out again at every use.
 */
export type Named<Output, Input = Output> = z.ZodType<Output, z.ZodTypeDef, Input>;
/** For naming a schema that keeps its own methods (`.extend`, `.strict`): `interface XSchemaType extends Alias<typeof xSchema> {}`. */
export type Alias<T> = T;

/** Route metadata `{ public: true }` marks an operation that needs no access token. */
export const isPublicRoute = (route: AppRoute): boolean => {
  // Called for every request: a plain check, no schema.
  const metadata: unknown = route.metadata;
  return typeof metadata === 'object' && metadata !== null && 'public' in metadata && metadata.public === true;
};

/**
 * A UUID (the service issues UUIDv7, lower-case). Any case is accepted and read as lower case;
 * malformed ids are 400, unknown ones 404. Lower-cased by zod's string check, not a transform: a
 * transform's wrapper made a path id's validation five times slower, and every request by id runs it.
 */
export const IdSchema = z.string().toLowerCase().uuid();
/** RFC 3339 timestamp; the service answers in UTC with milliseconds. */
export const TimestampSchema = z.string().datetime({ offset: true, precision: 3 });
/**
 * Accepted on input: an RFC 3339 timestamp (seconds and a `Z` or `±hh:mm` offset required, fractional
 * seconds optional) within the years 0001–9999 in UTC, the range the database and JSON dates share.
 */
export const TimestampInputSchema = z
  .string()
  .datetime({ offset: true })
  .regex(
    /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/,
    'Expected an RFC 3339 timestamp such as 2026-11-22T15:04:05Z',
  )
  .refine((value) => {
    const year = new Date(value).getUTCFullYear();
    return year >= 1 && year <= 9999;
  }, 'Expected a timestamp within the years 0001 to 9999 (UTC)');

const validationIssueSchema = z.object({
  path: z
    .string()
    .describe(
      'Where the issue is: `body`, `query`, `path` or `header`, then the field, e.g. `body.title`, `query.limit`, `header.if-match`',
    ),
  code: z
    .string()
    .describe(
      "The kind of issue, e.g. zod's `too_small`, `invalid_enum_value`, `invalid_string`, or the service's own such as `unknown_user`",
    ),
  message: z.string().describe('A readable explanation of the issue (English)'),
});
export interface ValidationIssue extends z.output<typeof validationIssueSchema> {}
export const ValidationIssueSchema: Named<ValidationIssue> = validationIssueSchema;

export const ProblemCodeSchema = z.enum(PROBLEM_CODES);
export type ProblemCode = z.infer<typeof ProblemCodeSchema>;

/** RFC 9457 problem details, the body of every 4xx and 5xx answer. */
const problemSchema = z.object({
  type: z
    .string()
    .describe('`/problems/<code>`, relative to the service: a page saying what the code means and what to do'),
  title: z.string().describe('A short summary of the problem code, the same for every occurrence'),
  status: z.number().int().describe('The HTTP status code of this answer'),
  code: ProblemCodeSchema.describe('Stable machine-readable code: branch on this, not on `title` or `detail`'),
  detail: z.string().describe('What went wrong with this request, in English; may change between versions'),
  instance: z.string().describe('The path of the request that failed'),
  requestId: z.string().describe('The `X-Request-Id` of this request: quote it when reporting a problem'),
  errors: z
    .array(ValidationIssueSchema)
    .optional()
    .describe('With `validation_failed`: the issues found, not only the first; at most 20'),
  truncated: z
    .literal(true)
    .optional()
    .describe(
      'Present when more issues were found than `errors` lists (it lists at most 20), so that an answer stays small',
    ),
});
export interface Problem extends z.output<typeof problemSchema> {}
/** The schema's own type, by name (it keeps `.extend` and `.strict`). */
export interface ProblemSchemaType extends Alias<typeof problemSchema> {}
export const ProblemSchema: ProblemSchemaType = problemSchema;

/** The error answers every authenticated operation may give. */
export const commonErrors = {
  400: ProblemSchema,
  401: ProblemSchema,
  415: ProblemSchema,
  429: ProblemSchema,
  500: ProblemSchema,
  503: ProblemSchema,
} as const;

export const PaginationQuerySchema = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(20).describe('Items per page, 1 to 100'),
  cursor: z
    .string()
    .min(1)
    .max(2048)
    .optional()
    .describe(
      "Opaque, signed: the previous page's `nextCursor`, sent with the same filters and sort. Omit for the first page; an altered cursor is 400",
    ),
});

export function pageOf<T extends z.ZodTypeAny>(item: T) {
  return z.object({
    items: z.array(item).describe('This page, in the order of the list'),
    nextCursor: z.string().nullable().describe('Pass as `cursor` to get the next page; null on the last page'),
  });
}

export function listOf<T extends z.ZodTypeAny>(item: T) {
  return z.object({ items: z.array(item).describe('Every item, in the order of the list') });
}

/**
 * A comma-separated query value (`a,b,c`) parsed as a non-empty set of `item`. The parameter may also
 * be repeated (`?status=a&status=b`, as generated OpenAPI clients send arrays), and both combine.
 */
export function commaList<T extends z.ZodTypeAny>(item: T) {
  return z
    .union([z.string().max(2000), boundedArray(z.string().max(2000), 50)])
    .transform((value) =>
      (typeof value === 'string' ? [value] : value).flatMap((part) => part.split(',')).map((part) => part.trim()),
    )
    .pipe(boundedArray(item, 50, 1));
}

/**
 * An array of at most `max` items whose length is checked before any item is, so that a million
 * bad items cost one issue, not a million (zod checks every item even past the maximum).
 */
export function boundedArray<T extends z.ZodTypeAny>(item: T, max: number, min = 0) {
  return new z.ZodEffects({
    typeName: z.ZodFirstPartyTypeKind.ZodEffects,
    schema: z.array(item).min(min).max(max),
    effect: {
      type: 'preprocess',
      transform: (value: unknown, ctx: z.RefinementCtx) => {
        if (Array.isArray(value) && value.length > max) {
          ctx.addIssue({
            code: z.ZodIssueCode.too_big,
            maximum: max,
            type: 'array',
            inclusive: true,
            exact: false,
            message: `Array must contain at most ${max} element(s)`,
            fatal: true,
          });
        }
        return value;
      },
    },
  });
}

// RFC 9110 §8.8.3, §13.1.1: `*`, or a comma-separated list of entity tags, each in quotes, maybe weak.
const ENTITY_TAG = String.raw`(W/)?"[\x21\x23-\x7e\x80-\xff]*"`;
const IF_MATCH = new RegExp(String.raw`^\s*(\*|${ENTITY_TAG}(\s*,\s*${ENTITY_TAG})*)\s*$`);
export const IfMatchHeaders = z.object({
  'if-match': z
    .string()
    .max(200)
    .regex(
      IF_MATCH,
      'If-Match takes * or ETags in quotes, exactly as the ETag header sends them: If-Match: "4", not If-Match: 4',
    )
    .optional()
    .describe(
      '`*` (any current version) or ETags in quotes as the ETag header sends them (`"4"`); a mismatch is 412, an unquoted value 400',
    ),
});
export const IfNoneMatchHeaders = z.object({
  'if-none-match': z
    .string()
    .max(200)
    .optional()
    .describe(
      'The ETag of your copy (`"4"`), or several: when one matches the current version the answer is 304 with no body',
    ),
});

// A UTF-16 surrogate without its partner: JSON can carry one (`"\ud800"`), UTF-8 cannot.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Text PostgreSQL can store and search: valid Unicode, without U+0000 (its text type cannot hold it). */
export const storableText = (schema: z.ZodString) =>
  schema
    .refine((value) => !value.includes('\u0000'), 'Must not contain the NUL character (U+0000)')
    .refine((value) => !LONE_SURROGATE.test(value), 'Must be valid Unicode (no lone surrogate)');

/** A search term: a case-insensitive substring. */
export const SearchSchema = (maxLength: number) => storableText(z.string().trim().min(1).max(maxLength));

export const EmailSchema = z
  .string()
  .trim()
  .toLowerCase()
  .email()
  .max(254)
  .describe('An email address, at most 254 characters; unique ignoring case, stored trimmed and lower-case');
export const PasswordSchema = z
  .string()
  .min(8)
  .max(128)
  .describe('8 to 128 characters, no composition rules; stored only as an argon2id hash');
export const PersonNameSchema = storableText(z.string().trim().min(1).max(100)).describe(
  'The display name, 1 to 100 characters after trimming',
);
