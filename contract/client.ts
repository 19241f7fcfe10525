// A typed client for the task service: every operation of the contract, plus a session that keeps
// its tokens and renews the access token when it expires. Depends only on @ts-rest/core and zod.
import { initClient, isAppRouteOtherResponse, isZodType, type ApiFetcherArgs, type AppRoute } from '@ts-rest/core';
import { z } from 'zod';
import type { AuthResult } from './auth.js';
import { isPublicRoute } from './common.js';
import { contract } from './index.js';

export interface SessionTokens {
  accessToken: string;
  refreshToken: string;
}

export interface ClientOptions {
  /** Where the service answers, e.g. `https://tasks.example.com`. */
  baseUrl: string;
  /** Tokens saved from an earlier session (see `onTokens`), to resume it without logging in. */
  tokens?: SessionTokens;
  /** Called whenever the tokens change: after register, login or refresh, and with undefined once the session ends. */
  onTokens?: (tokens: SessionTokens | undefined) => void;
  /** Parse every JSON answer with the contract's schema (a mismatch throws). */
  validateResponse?: boolean;
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

/**
 * A client for the service at `options.baseUrl`. `client.auth.register`, `login` and `refresh`
 * keep the tokens they return; every other call sends the access token and, when the service
 * answers 401 because it expired, refreshes the session once (concurrent calls share one refresh)
 * and retries once. When the refresh fails, the original 401 is returned.
 */
export function createClient(options: ClientOptions) {
  const fetchImpl = options.fetch ?? fetch;
  let tokens = options.tokens;
  let refreshing: Promise<string | undefined> | undefined;

  const useTokens = (next: SessionTokens | undefined) => {
    tokens = next;
    options.onTokens?.(next);
  };
  const keep = ({ accessToken, refreshToken }: AuthResult) => useTokens({ accessToken, refreshToken });

  const exchange = async (args: ApiFetcherArgs, accessToken: string | undefined): Promise<Answer> => {
    const headers = accessToken ? { ...args.headers, authorization: `Bearer ${accessToken}` } : args.headers;
    const response = await fetchImpl(args.path, { ...args.fetchOptions, method: args.method, headers, body: requestBody(args) ?? null });
    return { status: response.status, headers: response.headers, body: await responseBody(args.route, response, args.validateResponse ?? false) };
  };

  const refreshSession = async (): Promise<string | undefined> => {
    if (!tokens) return undefined;
    const answer = await api.auth.refresh({ body: { refreshToken: tokens.refreshToken } });
    if (answer.status === 200) {
      keep(answer.body);
      return answer.body.accessToken;
    }
    if (answer.status === 401) useTokens(undefined); // the session is over: log in again
    return undefined;
  };

  /** A fresh access token to replace `stale`, refreshing at most once for all who ask together. */
  const renewedAccessToken = (stale: string | undefined): Promise<string | undefined> => {
    if (tokens && tokens.accessToken !== stale) return Promise.resolve(tokens.accessToken);
    refreshing ??= refreshSession().finally(() => {
      refreshing = undefined;
    });
    return refreshing;
  };

  const send = async (args: ApiFetcherArgs): Promise<Answer> => {
    if (isPublicRoute(args.route)) return exchange(args, undefined);
    const used = tokens?.accessToken;
    const answer = await exchange(args, used);
    if (answer.status !== 401 || !tokens || !UnauthenticatedSchema.safeParse(answer.body).success) return answer;
    const renewed = await renewedAccessToken(used);
    return renewed ? exchange(args, renewed) : answer;
  };

  const api = initClient(contract, {
    baseUrl: options.baseUrl.replace(/\/+$/, ''),
    validateResponse: options.validateResponse ?? false,
    api: send,
  });

  const register: typeof api.auth.register = async (args) => {
    const answer = await api.auth.register(args);
    if (answer.status === 201) keep(answer.body);
    return answer;
  };
  const login: typeof api.auth.login = async (args) => {
    const answer = await api.auth.login(args);
    if (answer.status === 200) keep(answer.body);
    return answer;
  };
  const refresh: typeof api.auth.refresh = async (args) => {
    const answer = await api.auth.refresh(args);
    if (answer.status === 200) keep(answer.body);
    return answer;
  };
  const logout: typeof api.auth.logout = async (args) => {
    const answer = await api.auth.logout(args);
    if (answer.status === 204 || answer.status === 401) useTokens(undefined);
    return answer;
  };

  return {
    ...api,
    auth: { ...api.auth, register, login, refresh, logout },
    /** The current session's tokens, if any. */
    tokens: (): SessionTokens | undefined => tokens,
    /** Adopt (or, with undefined, drop) a session's tokens. */
    useTokens,
  };
}

export type Client = ReturnType<typeof createClient>;
