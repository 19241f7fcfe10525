// A typed client for the task service: every operation of the contract, plus a session that keeps
// its tokens and renews the access token when it expires, retries that are safe, timeouts, and
// helpers for lists and the live event stream. Typed by the contract; at run time it carries only the
// routes (routes.ts) and fetch: no zod, no schemas, no descriptions (see `validateAnswers` for those).
import type { ClientArgs, InitClientReturn } from '@ts-rest/core';
import { ok } from './answers.js';
import type { AuthResult } from './auth.js';
import { prepareRequest, readBody, type Answer, type AnswerValidator, type CallArgs } from './call.js';
import { subscribeToEvents, type SubscribeOptions } from './event-stream.js';
import type { Event } from './events.js';
import type { Contract } from './contract.js';
import { itemsOf, pagesOf, type Page } from './pages.js';
import {
  backoffMs,
  isIdempotent,
  retryAfterMs,
  retryPolicy,
  RETRYABLE_STATUSES,
  sleep,
  type RetryOptions,
} from './retry.js';
import type { RouteInfo } from './route-table.js';
import { routes } from './routes.js';
import type { Project } from './projects.js';
import type { Tag } from './tags.js';
import type { Task, TaskListQuery, TaskListQuerySchema, TaskPriority, TaskStatus } from './tasks.js';
import type { User } from './users.js';
import type { z } from 'zod';

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
  /**
   * Checks every answer against the contract, e.g. `validateAnswers` from
   * `@task-service/client/validate` (which brings zod and the schemas; a mismatch throws).
   */
  validate?: AnswerValidator;
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

/** Every operation of the contract as a function, typed as ts-rest's own client types it. */
export type Operations = InitClientReturn<Contract, ClientArgs>;
type Args<F extends (args: never) => unknown> = Parameters<F>[0];
type ListArgs<F extends (args: never) => unknown> = Omit<NonNullable<Args<F>>, 'query'>;

/** `client.tasks.list` arguments: filters take arrays, e.g. `{ status: ['todo', 'in_progress'] }`. */
export type TaskListArgs = ListArgs<Operations['tasks']['list']> & { query?: TaskListFilters };
/** `client.users.listTasks` arguments, filters as for `TaskListArgs`. */
export type UserTasksArgs = ListArgs<Operations['users']['listTasks']> & {
  query?: TaskListFilters & Omit<NonNullable<Args<Operations['users']['listTasks']>['query']>, keyof TaskListFilters>;
};
type UserListArgs = Args<Operations['users']['list']>;
type TagListArgs = Args<Operations['tags']['list']>;
type ProjectListArgs = Args<Operations['projects']['list']>;

/** The typed client: every operation, and the session, pagination and event stream around them. */
export type Client = Omit<Operations, 'tasks' | 'users' | 'tags' | 'projects' | 'events'> & {
  tasks: Omit<Operations['tasks'], 'list'> & {
    /** Filters take arrays: `{ status: ['todo', 'in_progress'] }` (sent as `status=todo,in_progress`). */
    list(args?: TaskListArgs): ReturnType<Operations['tasks']['list']>;
    /** Every page of the list, fetched as the loop asks: `for await (const page of client.tasks.pages({ query }))`. Throws `ProblemError` on an error answer. */
    pages(args?: TaskListArgs): AsyncGenerator<Page<Task>, void, undefined>;
    /** Every task of the list, across pages. */
    all(args?: TaskListArgs): AsyncGenerator<Task, void, undefined>;
  };
  users: Omit<Operations['users'], 'listTasks'> & {
    listTasks(args: UserTasksArgs): ReturnType<Operations['users']['listTasks']>;
    pages(args?: UserListArgs): AsyncGenerator<Page<User>, void, undefined>;
    all(args?: UserListArgs): AsyncGenerator<User, void, undefined>;
    taskPages(args: UserTasksArgs): AsyncGenerator<Page<Task>, void, undefined>;
    allTasks(args: UserTasksArgs): AsyncGenerator<Task, void, undefined>;
  };
  tags: Operations['tags'] & {
    pages(args?: TagListArgs): AsyncGenerator<Page<Tag>, void, undefined>;
    all(args?: TagListArgs): AsyncGenerator<Tag, void, undefined>;
  };
  projects: Operations['projects'] & {
    pages(args?: ProjectListArgs): AsyncGenerator<Page<Project>, void, undefined>;
    all(args?: ProjectListArgs): AsyncGenerator<Project, void, undefined>;
  };
  events: Operations['events'] & {
    /**
     * The live stream as typed events, reconnecting by itself and resuming where it stopped:
     * `for await (const event of client.events.subscribe({ signal }))`. See `subscribeToEvents`.
     */
    subscribe(options?: SubscribeOptions): AsyncGenerator<Event>;
  };
  /** The session's tokens as this client last saw them, if any. */
  tokens(): SessionTokens | undefined;
  /** Adopt (or, with undefined, drop) a session's tokens. */
  useTokens(tokens: SessionTokens | undefined): Promise<void>;
};

type RouteTree = { readonly [name: string]: RouteInfo | RouteTree };
const isRoute = (entry: RouteInfo | RouteTree): entry is RouteInfo => typeof entry['method'] === 'string';

/** The operations of `table` as functions of their arguments, each calling `call` with its name (`tasks.get`). */
function operationsOf(
  table: RouteTree,
  call: (operation: string, route: RouteInfo, args: CallArgs) => Promise<Answer>,
  prefix = '',
): Record<string, unknown> {
  const operations: Record<string, unknown> = {};
  for (const [name, entry] of Object.entries(table)) {
    const operation = `${prefix}${name}`;
    operations[name] = isRoute(entry)
      ? (args: CallArgs = {}) => call(operation, entry, args)
      : operationsOf(entry, call, `${operation}.`);
  }
  return operations;
}

/** The route table walked above, seen through the contract's types (routes.ts is checked against them). */
function typedOperations(operations: Record<string, unknown>): Operations;
function typedOperations(operations: unknown): unknown {
  return operations;
}

/**
 * A client for the service at `options.baseUrl`. `client.auth.register`, `login` and `refresh`
 * keep the tokens they return; every other call sends the access token and, when the service
 * answers 401 (an expired token), refreshes the session once (concurrent calls share one refresh)
 * and retries once. When the refresh fails, the original 401 is returned.
 */
export function createClient(options: ClientOptions): Client {
  const fetchImpl = options.fetch ?? fetch;
  const policy = retryPolicy(options.retry);
  const timeoutMs = options.timeoutMs ?? 30_000;
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
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
  const exchange = async (
    operation: string,
    route: RouteInfo,
    args: CallArgs,
    accessToken: string | undefined,
  ): Promise<Answer> => {
    const request = prepareRequest(baseUrl, route, args);
    if (accessToken) request.headers['authorization'] = `Bearer ${accessToken}`;
    const signal = callSignal(args.fetchOptions?.signal, timeoutMs);
    const init: RequestInit = {
      ...args.fetchOptions,
      method: request.method,
      headers: request.headers,
      body: request.body ?? null,
      signal,
    };
    const retries = isIdempotent(request.method, request.headers) ? policy.retries : 0;
    for (let retry = 0; ; retry++) {
      let response: Response;
      try {
        response = await fetchImpl(request.url, init);
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
      const body = await readBody(route, response);
      return {
        status: response.status,
        headers: response.headers,
        body: options.validate ? options.validate(operation, response.status, body) : body,
      };
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

  const isUnauthenticated = (body: unknown) =>
    typeof body === 'object' && body !== null && 'code' in body && body.code === 'unauthenticated';
  const send = async (operation: string, route: RouteInfo, args: CallArgs): Promise<Answer> => {
    if (route.public) return exchange(operation, route, args, undefined);
    if (options.personalAccessToken !== undefined) return exchange(operation, route, args, options.personalAccessToken);
    const used = (await readTokens())?.accessToken;
    const answer = await exchange(operation, route, args, used);
    if (answer.status !== 401 || used === undefined || !isUnauthenticated(answer.body)) return answer;
    const renewed = await renewedAccessToken(used);
    return renewed ? exchange(operation, route, args, renewed) : answer;
  };

  const api = typedOperations(operationsOf(routes, send));

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

  const listTasks = ({ query, ...args }: TaskListArgs = {}) =>
    api.tasks.list({ ...args, ...(query ? { query: commaLists(query) } : {}) });
  const listUserTasks = ({ query, ...args }: UserTasksArgs) =>
    api.users.listTasks({ ...args, ...(query ? { query: commaLists(query) } : {}) });

  /** `args` with its query's cursor set (or left out, for the first page). */
  const at = <A extends { query?: object }>(args: A, cursor: string | undefined): A =>
    cursor ? { ...args, query: { ...args.query, cursor } } : args;

  const taskPages = (args: TaskListArgs = {}) =>
    pagesOf(async (cursor) => (await ok(listTasks(at(args, cursor)))).body);
  const userTaskPages = (args: UserTasksArgs) =>
    pagesOf(async (cursor) => (await ok(listUserTasks(at(args, cursor)))).body);
  const userPages = (args: UserListArgs = {}) =>
    pagesOf(async (cursor) => (await ok(api.users.list(at(args, cursor)))).body);
  const tagPages = (args: TagListArgs = {}) =>
    pagesOf(async (cursor) => (await ok(api.tags.list(at(args, cursor)))).body);
  const projectPages = (args: ProjectListArgs = {}) =>
    pagesOf(async (cursor) => (await ok(api.projects.list(at(args, cursor)))).body);

  return {
    ...api,
    auth: { ...api.auth, register, login, refresh, logout },
    tasks: {
      ...api.tasks,
      list: listTasks,
      pages: taskPages,
      all: (args: TaskListArgs = {}) => itemsOf(taskPages(args)),
    },
    users: {
      ...api.users,
      listTasks: listUserTasks,
      pages: userPages,
      all: (args: UserListArgs = {}) => itemsOf(userPages(args)),
      taskPages: userTaskPages,
      allTasks: (args: UserTasksArgs) => itemsOf(userTaskPages(args)),
    },
    tags: { ...api.tags, pages: tagPages, all: (args: TagListArgs = {}) => itemsOf(tagPages(args)) },
    projects: {
      ...api.projects,
      pages: projectPages,
      all: (args: ProjectListArgs = {}) => itemsOf(projectPages(args)),
    },
    events: {
      ...api.events,
      subscribe: (subscribeOptions?: SubscribeOptions) =>
        subscribeToEvents(
          {
            url: `${baseUrl}/events`,
            fetch: fetchImpl,
            accessToken: async () => options.personalAccessToken ?? (await readTokens())?.accessToken,
            renewedAccessToken: async (stale) =>
              options.personalAccessToken === undefined ? renewedAccessToken(stale) : undefined,
          },
          subscribeOptions,
        ),
    },
    tokens: () => tokens,
    useTokens,
  };
}
