// A typed client for the task service: every operation of the contract, plus a session that keeps
// its tokens and renews the access token when it expires, retries that are safe, timeouts, and
// helpers for lists and the live event stream. Depends only on @ts-rest/core and zod.
import { initClient, isAppRouteOtherResponse, isZodType, type ApiFetcherArgs, type AppRoute } from '@ts-rest/core';
import { z } from 'zod';
import { ok } from './answers.js';
import type { AuthResult } from './auth.js';
import { isPublicRoute } from './common.js';
import { subscribeToEvents, type SubscribeOptions } from './event-stream.js';
import { contract } from './index.js';
import { itemsOf, pagesOf } from './pages.js';
import { backoffMs, isIdempotent, retryAfterMs, retryPolicy, RETRYABLE_STATUSES, sleep, type RetryOptions } from './retry.js';
import type { TaskListQuery, TaskListQuerySchema, TaskPriority, TaskStatus } from './tasks.js';

export interface SessionTokens {
  accessToken: string;
  refreshToken: string;
}

/**
 * Where a session's tokens live. Clients given the same store (tabs over `localStorage`, workers over
 * a shared cache) share one session: each reads the store before a call and again before refreshing,
 * so a token another client rotated is used rather than refreshed a second time (which would be
 * reuse, and end the session).
 */
export interface TokenStore {
  get(): SessionTokens | undefined | Promise<SessionTokens | undefined>;
  set(tokens: SessionTokens | undefined): void | Promise<void>;
}

/** A store in memory: the default, one per client unless you pass the same one to several. */
export function memoryTokenStore(initial?: SessionTokens): TokenStore {
  let tokens = initial;
  return {
    get: () => tokens,
    set: (next) => {
      tokens = next;
    },
  };
}

export interface ClientOptions {
  /** Where the service answers, e.g. `https://tasks.example.com`. */
  baseUrl: string;
  /** Tokens saved from an earlier session (see `onTokens`), to resume it without logging in. Ignored with `tokenStore`. */
  tokens?: SessionTokens;
  /** Where to keep the tokens; share one between clients to share their session. Default: in memory. */
  tokenStore?: TokenStore;
  /** Called whenever this client changes the tokens: after register, login or refresh, and with undefined once the session ends. */
  onTokens?: (tokens: SessionTokens | undefined) => void;
  /** A personal access token (`tsk_pat_…`) to send instead of a session's access token; it is never refreshed. */
  personalAccessToken?: string;
  /** Parse every JSON answer with the contract's schema (a mismatch throws). */
  validateResponse?: boolean;
  /**
   * Retries of 429 and 503 answers (after their Retry-After) and of network errors, with backoff;
   * only for calls that are safe to repeat: GET, PUT, DELETE, or any call with an `Idempotency-Key`
   * header. `false` turns them off. Default: 2 retries.
   */
  retry?: RetryOptions | false;
  /** Abandon each request after this long (a `TimeoutError` is thrown). Per call, pass `fetchOptions: { signal }`. Default: 30 s. */
  timeoutMs?: number;
  /** The fetch to use; the global one by default. */
  fetch?: typeof fetch;
}

interface Answer {
  status: number;
  body: unknown;
  headers: Headers;
}

const UnauthenticatedSchema = z.object({ code: z.literal('unauthenticated') });

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

function requestBody(args: ApiFetcherArgs): ApiFetcherArgs['body'] {
  const raw = args.rawBody;
  // ts-rest turns a Blob that is not a File into JSON text; build the form ourselves.
  if (args.contentType === 'multipart/form-data' && typeof raw === 'object' && raw !== null && !(raw instanceof FormData)) return formDataOf(raw);
  return args.body;
}

async function responseBody(route: AppRoute, response: Response, validate: boolean): Promise<unknown> {
  if (response.status === 204 || response.status === 304) return undefined;
  const declared = route.responses[response.status];
  if (declared !== undefined && isAppRouteOtherResponse(declared)) return declared.contentType.startsWith('text/') ? response.text() : response.blob();
  const type = response.headers.get('content-type') ?? '';
  if (/^application\/([\w.-]+\+)?json\b/.test(type)) {
    const json: unknown = await response.json();
    return validate && isZodType(declared) ? declared.parse(json) : json;
  }
  return type.startsWith('text/') ? response.text() : response.blob();
}

/** The caller's signal and the client's timeout, whichever aborts first. */
function callSignal(signal: AbortSignal | null | undefined, timeoutMs: number): AbortSignal {
  const timeout = AbortSignal.timeout(timeoutMs);
  return signal ? AbortSignal.any([signal, timeout]) : timeout;
}

/** Task list filters as a caller writes them: several values of a filter as an array. */
export type TaskListFilters = Omit<z.input<typeof TaskListQuerySchema>, 'status' | 'priority' | 'tagId'> & {
  status?: TaskStatus[];
  priority?: TaskPriority[];
  tagId?: string[];
};
type CommaListFilters = Pick<TaskListQuery, 'status' | 'priority' | 'tagId'>;

/** The filters as the service reads them: `status=todo,done`. */
function commaLists<F extends Partial<CommaListFilters>>({ status, priority, tagId, ...rest }: F) {
  return {
    ...rest,
    ...(status ? { status: status.join(',') } : {}),
    ...(priority ? { priority: priority.join(',') } : {}),
    ...(tagId ? { tagId: tagId.join(',') } : {}),
  };
}

/** In-flight refreshes by store: clients sharing a store in one process share one refresh too. */
const refreshes = new WeakMap<TokenStore, Promise<string | undefined>>();

/**
 * A client for the service at `options.baseUrl`. `client.auth.register`, `login` and `refresh`
 * keep the tokens they return; every other call sends the access token and, when the service
 * answers 401 (an expired token), refreshes the session once (concurrent calls share one refresh)
 * and retries once. When the refresh fails, the original 401 is returned.
 */
export function createClient(options: ClientOptions) {
  const fetchImpl = options.fetch ?? fetch;
  const policy = retryPolicy(options.retry);
  const timeoutMs = options.timeoutMs ?? 30_000;
  const store = options.tokenStore ?? memoryTokenStore(options.tokens);
  /** The tokens this client last read or wrote. */
  let tokens: SessionTokens | undefined = options.tokenStore ? undefined : options.tokens;

  const readTokens = async (): Promise<SessionTokens | undefined> => (tokens = await store.get());
  const useTokens = async (next: SessionTokens | undefined): Promise<void> => {
    tokens = next;
    await store.set(next);
    options.onTokens?.(next);
  };
  const keep = ({ accessToken, refreshToken }: AuthResult) => useTokens({ accessToken, refreshToken });

  /** One request, sent again on 429/503 or a network error when that is safe. */
  const exchange = async (args: ApiFetcherArgs, accessToken: string | undefined): Promise<Answer> => {
    const headers = accessToken ? { ...args.headers, authorization: `Bearer ${accessToken}` } : args.headers;
    const signal = callSignal(args.fetchOptions?.signal, timeoutMs);
    const init: RequestInit = { ...args.fetchOptions, method: args.method, headers, body: requestBody(args) ?? null, signal };
    const retries = isIdempotent(args.method, args.headers) ? policy.retries : 0;
    for (let retry = 0; ; retry++) {
      let response: Response;
      try {
        response = await fetchImpl(args.path, init);
      } catch (error) {
        if (signal.aborted || retry >= retries) throw error;
        await sleep(backoffMs(policy, retry), signal);
        continue;
      }
      if (RETRYABLE_STATUSES.has(response.status) && retry < retries) {
        const wait = retryAfterMs(response.headers.get('retry-after')) ?? backoffMs(policy, retry);
        if (wait <= policy.maxDelayMs) {
          await response.body?.cancel();
          await sleep(wait, signal);
          continue;
        }
      }
      return { status: response.status, headers: response.headers, body: await responseBody(args.route, response, args.validateResponse ?? false) };
    }
  };

  /** Refreshes the session whose access token `stale` was refused, unless someone already did. */
  const refreshSession = async (stale: string | undefined): Promise<string | undefined> => {
    const latest = await readTokens();
    if (!latest) return undefined;
    if (latest.accessToken !== stale) return latest.accessToken;
    const answer = await api.auth.refresh({ body: { refreshToken: latest.refreshToken } });
    if (answer.status === 200) {
      await keep(answer.body);
      return answer.body.accessToken;
    }
    // The session is over: log in again. (Unless another client has meanwhile started a new one.)
    if (answer.status === 401 && (await readTokens())?.refreshToken === latest.refreshToken) await useTokens(undefined);
    return undefined;
  };

  /** A fresh access token to replace `stale`, refreshing at most once for all who ask together. */
  const renewedAccessToken = (stale: string | undefined): Promise<string | undefined> => {
    let pending = refreshes.get(store);
    if (!pending) {
      pending = refreshSession(stale).finally(() => refreshes.delete(store));
      refreshes.set(store, pending);
    }
    return pending;
  };

  const send = async (args: ApiFetcherArgs): Promise<Answer> => {
    if (isPublicRoute(args.route)) return exchange(args, undefined);
    if (options.personalAccessToken !== undefined) return exchange(args, options.personalAccessToken);
    const used = (await readTokens())?.accessToken;
    const answer = await exchange(args, used);
    if (answer.status !== 401 || used === undefined || !UnauthenticatedSchema.safeParse(answer.body).success) return answer;
    const renewed = await renewedAccessToken(used);
    return renewed ? exchange(args, renewed) : answer;
  };

  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const api = initClient(contract, {
    baseUrl,
    validateResponse: options.validateResponse ?? false,
    api: send,
  });

  const register: typeof api.auth.register = async (args) => {
    const answer = await api.auth.register(args);
    if (answer.status === 201) await keep(answer.body);
    return answer;
  };
  const login: typeof api.auth.login = async (args) => {
    const answer = await api.auth.login(args);
    if (answer.status === 200) await keep(answer.body);
    return answer;
  };
  const refresh: typeof api.auth.refresh = async (args) => {
    const answer = await api.auth.refresh(args);
    if (answer.status === 200) await keep(answer.body);
    return answer;
  };
  const logout: typeof api.auth.logout = async (args) => {
    const answer = await api.auth.logout(args);
    if (answer.status === 204 || answer.status === 401) await useTokens(undefined);
    return answer;
  };

  type TaskListArgs = Omit<NonNullable<Parameters<typeof api.tasks.list>[0]>, 'query'> & { query?: TaskListFilters };
  type UserTasksArgs = Omit<Parameters<typeof api.users.listTasks>[0], 'query'> & {
    query?: TaskListFilters & Omit<NonNullable<Parameters<typeof api.users.listTasks>[0]['query']>, keyof TaskListFilters>;
  };
  type Args<F extends (args: never) => unknown> = Parameters<F>[0];

  const listTasks = ({ query, ...args }: TaskListArgs = {}) => api.tasks.list({ ...args, ...(query ? { query: commaLists(query) } : {}) });
  const listUserTasks = ({ query, ...args }: UserTasksArgs) => api.users.listTasks({ ...args, ...(query ? { query: commaLists(query) } : {}) });

  /** `args` with its query's cursor set (or left out, for the first page). */
  const at = <A extends { query?: object }>(args: A, cursor: string | undefined): A => (cursor ? { ...args, query: { ...args.query, cursor } } : args);

  const taskPages = (args: TaskListArgs = {}) => pagesOf(async (cursor) => (await ok(listTasks(at(args, cursor)))).body);
  const userTaskPages = (args: UserTasksArgs) => pagesOf(async (cursor) => (await ok(listUserTasks(at(args, cursor)))).body);
  const userPages = (args: Args<typeof api.users.list> = {}) => pagesOf(async (cursor) => (await ok(api.users.list(at(args, cursor)))).body);
  const tagPages = (args: Args<typeof api.tags.list> = {}) => pagesOf(async (cursor) => (await ok(api.tags.list(at(args, cursor)))).body);

  return {
    ...api,
    auth: { ...api.auth, register, login, refresh, logout },
    tasks: {
      ...api.tasks,
      /** Filters take arrays: `{ status: ['todo', 'in_progress'] }` (sent as `status=todo,in_progress`). */
      list: listTasks,
      /** Every page of the list, fetched as the loop asks: `for await (const page of client.tasks.pages({ query }))`. Throws `ProblemError` on an error answer. */
      pages: taskPages,
      /** Every task of the list, across pages. */
      all: (args: TaskListArgs = {}) => itemsOf(taskPages(args)),
    },
    users: {
      ...api.users,
      listTasks: listUserTasks,
      pages: userPages,
      all: (args: Args<typeof api.users.list> = {}) => itemsOf(userPages(args)),
      taskPages: userTaskPages,
      allTasks: (args: UserTasksArgs) => itemsOf(userTaskPages(args)),
    },
    tags: {
      ...api.tags,
      pages: tagPages,
      all: (args: Args<typeof api.tags.list> = {}) => itemsOf(tagPages(args)),
    },
    events: {
      ...api.events,
      /**
       * The live stream as typed events, reconnecting by itself and resuming where it stopped:
       * `for await (const event of client.events.subscribe({ signal }))`. See `subscribeToEvents`.
       */
      subscribe: (subscribeOptions?: SubscribeOptions) =>
        subscribeToEvents(
          {
            url: `${baseUrl}/events`,
            fetch: fetchImpl,
            accessToken: async () => options.personalAccessToken ?? (await readTokens())?.accessToken,
            renewedAccessToken: async (stale) => (options.personalAccessToken === undefined ? renewedAccessToken(stale) : undefined),
          },
          subscribeOptions,
        ),
    },
    /** The session's tokens as this client last saw them, if any. */
    tokens: (): SessionTokens | undefined => tokens,
    /** Adopt (or, with undefined, drop) a session's tokens. */
    useTokens,
  };
}

export type Client = ReturnType<typeof createClient>;
