// A `curl` command line and a typed-client call for every operation, made from the contract and
// its examples (./examples.ts), shown on /docs. test/code-samples.test.ts runs every command line
// against a service, in order, with the ids of objects it created, and type-checks the client calls,
// so they stay true. Samples are written for SAMPLE_BASE_URL; the document served to a request names
// the URL that request reached instead (see ./document.ts).
import { isAppRouteNoBody, type AppRoute } from '@ts-rest/core';
import { isPublicRoute } from '@task-service/client';
import { z } from 'zod';
import type { AnyOperationExamples } from './examples.js';
import { pathParamValues } from './example-values.js';

export const SAMPLE_BASE_URL = 'http://localhost:3000';

/** The shell variable a curl sample reads each path parameter from: an id from an earlier answer. */
export const SAMPLE_VARIABLES: Record<string, string> = {
  user_id: 'USER_ID',
  task_id: 'TASK_ID',
  tag_id: 'TAG_ID',
  attach_id: 'ATTACHMENT_ID',
  webhook_id: 'WEBHOOK_ID',
  delivery_id: 'DELIVERY_ID',
  token_id: 'TOKEN_ID',
  project_id: 'PROJECT_ID',
  other_id: 'OTHER_TASK_ID',
  comment_id: 'COMMENT_ID',
};

/**
 * The shell variable a curl sample's body reads an id from, by the example id it stands for: a body
 * that names another object (a relation's other task) must name one the reader made.
 */
const BODY_VARIABLES: Record<string, string> = { [pathParamValues.other_id ?? '']: 'OTHER_TASK_ID' };

/** The body as a shell word: single-quoted JSON, with the ids of BODY_VARIABLES read from the shell. */
const bodyWord = (body: unknown) =>
  Object.entries(BODY_VARIABLES).reduce(
    (word, [id, variable]) => word.replaceAll(`"${id}"`, `"'"$${variable}"'"`),
    quoted(JSON.stringify(body)),
  );

export interface CodeSample {
  lang: 'Shell' | 'TypeScript';
  label: string;
  source: string;
}

/** A word for a POSIX shell, in single quotes. */
const quoted = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;

const isMultipart = (route: AppRoute) =>
  route.method !== 'GET' && route.method !== 'DELETE' && route.contentType === 'multipart/form-data';
const hasJsonBody = (route: AppRoute) => 'body' in route && !isAppRouteNoBody(route.body) && !isMultipart(route);
const pathParamNames = (route: AppRoute) => [...route.path.matchAll(/:(\w+)/g)].map((match) => match[1] ?? '');

/** The path with `$TASK_ID`-style variables for ids, in double quotes so the shell expands them. */
const shellPath = (route: AppRoute) =>
  route.path.replace(/:(\w+)/g, (whole, name: string) =>
    SAMPLE_VARIABLES[name] ? `$${SAMPLE_VARIABLES[name]}` : (pathParamValues[name] ?? whole),
  );

export function curlSample(route: AppRoute, examples: AnyOperationExamples): string {
  const lines = [`curl${route.method === 'GET' ? '' : ` -X ${route.method}`} "${SAMPLE_BASE_URL}${shellPath(route)}"`];
  if (!isPublicRoute(route)) lines.push(`-H "Authorization: Bearer $TOKEN"`);
  if (isMultipart(route)) lines.push(`-F 'file=@report.pdf'`);
  else if (hasJsonBody(route) && examples.request !== undefined) {
    lines.push(`-H 'Content-Type: application/json'`, `-d ${bodyWord(examples.request)}`);
  }
  return lines.join(' \\\n  ');
}

const literal = (value: unknown) => JSON.stringify(value, null, 2).replace(/\n/g, '\n  ');

/** The headers a route requires (the contract's non-optional ones), with a plausible value. */
function requiredHeaders(route: AppRoute): Record<string, string> {
  const schema = route.headers;
  if (!(schema instanceof z.ZodObject)) return {};
  const shape: Record<string, z.ZodTypeAny> = schema.shape;
  return Object.fromEntries(
    Object.entries(shape)
      .filter(([, value]) => !value.isOptional())
      .map(([name]) => [name, name === 'if-match' ? '"5"' : 'value']),
  );
}

export function clientSample(route: AppRoute, clientPath: string, examples: AnyOperationExamples): string {
  const args: string[] = [];
  const params = pathParamNames(route);
  if (params.length > 0)
    args.push(`params: ${literal(Object.fromEntries(params.map((name) => [name, pathParamValues[name] ?? name])))}`);
  const headers = requiredHeaders(route);
  if (Object.keys(headers).length > 0) args.push(`headers: ${literal(headers)}`);
  if (isMultipart(route)) args.push(`body: { file: new Blob(['the bytes'], { type: 'text/plain' }) }`);
  else if (hasJsonBody(route) && examples.request !== undefined) args.push(`body: ${literal(examples.request)}`);
  const call = `client.${clientPath}(${args.length > 0 ? `{ ${args.join(', ')} }` : ''})`;
  return `import { createClient } from '@task-service/client';\n\nconst client = createClient({ baseUrl: '${SAMPLE_BASE_URL}' });\nconst answer = await ${call};\nconsole.log(answer.status, answer.body);`;
}

export function codeSamples(route: AppRoute, clientPath: string, examples: AnyOperationExamples): CodeSample[] {
  return [
    { lang: 'Shell', label: 'curl', source: curlSample(route, examples) },
    { lang: 'TypeScript', label: 'Typed client', source: clientSample(route, clientPath, examples) },
  ];
}

/** The samples as the description's closing section, which the reference page renders. */
export const samplesMarkdown = (samples: CodeSample[]): string =>
  samples
    .map((sample) => `**${sample.label}**\n\n\`\`\`${sample.lang === 'Shell' ? 'sh' : 'ts'}\n${sample.source}\n\`\`\``)
    .join('\n\n');
