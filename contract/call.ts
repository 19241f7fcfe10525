// One call of an operation over fetch: the request built from the route (method, path) and the
// caller's arguments as ts-rest's client takes them, and the answer read by its content type. No
// schemas at run time: answers are typed by the contract and parsed only with `validateAnswers`.
import type { RouteInfo } from './route-table.js';

/** The arguments of a call, as ts-rest types them per operation. */
export interface CallArgs {
  params?: Record<string, string | number>;
  query?: object;
  body?: unknown;
  headers?: Record<string, string | undefined>;
  extraHeaders?: Record<string, string | undefined>;
  fetchOptions?: RequestInit;
}

export interface Answer {
  status: number;
  body: unknown;
  headers: Headers;
}

/** Checks (and may transform) an answer's body; `operation` is the contract's key, e.g. `tasks.get`. */
export type AnswerValidator = (operation: string, status: number, body: unknown) => unknown;

/** A request about to be sent: what `fetch` gets, with headers as a plain object. */
export interface PreparedRequest {
  url: string;
  method: string;
  headers: Record<string, string>;
  body: RequestInit['body'];
}

/** Form fields from a plain object; Blobs (and Files, with their names) become file parts. */
function formDataOf(fields: object): FormData {
  const form = new FormData();
  const entries: [string, unknown][] = Object.entries(fields);
  for (const [name, value] of entries) {
    if (value instanceof Blob) form.append(name, value);
    else if (value !== undefined) form.append(name, String(value));
  }
  return form;
}

/** `a=1&b=x,y`: undefined left out, several values of an array as a comma list (the service's form). */
function queryString(query: object | undefined): string {
  const search = new URLSearchParams();
  const entries: [string, unknown][] = Object.entries(query ?? {});
  for (const [name, value] of entries) {
    if (value === undefined) continue;
    search.append(
      name,
      Array.isArray(value) ? value.join(',') : value instanceof Date ? value.toISOString() : String(value),
    );
  }
  const text = search.toString();
  return text ? `?${text}` : '';
}

/** The request of a call to `route` at `baseUrl` (without a trailing slash). */
export function prepareRequest(baseUrl: string, route: RouteInfo, args: CallArgs): PreparedRequest {
  const path = route.path.replace(/:(\w+)/g, (_, name: string) =>
    encodeURIComponent(String(args.params?.[name] ?? '')),
  );
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries({ ...args.headers, ...args.extraHeaders }))
    if (value !== undefined) headers[name.toLowerCase()] = value;
  let body: RequestInit['body'];
  if (route.multipart && typeof args.body === 'object' && args.body !== null) {
    body = args.body instanceof FormData ? args.body : formDataOf(args.body);
  } else if (args.body !== undefined) {
    body = JSON.stringify(args.body);
    headers['content-type'] ??= 'application/json';
  }
  return { url: `${baseUrl}${path}${queryString(args.query)}`, method: route.method, headers, body };
}

/** An answer's body: JSON parsed, text, a Blob, or undefined for 204 and 304. */
export async function readBody(route: RouteInfo, response: Response): Promise<unknown> {
  if (response.status === 204 || response.status === 304) return undefined;
  if (route.read && response.ok) return route.read === 'text' ? response.text() : response.blob();
  const type = response.headers.get('content-type') ?? '';
  if (/^application\/([\w.-]+\+)?json\b/.test(type)) return response.json();
  return type.startsWith('text/') ? response.text() : response.blob();
}
