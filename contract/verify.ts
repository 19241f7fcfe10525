// Contract tests anyone can run: every operation of the contract against a running service, with a
// throw-away account, checking that each answer has a status the contract declares and a body that
// matches its schema. `npx task-service-verify --base-url URL`, or `await verify({ baseUrl })`.
// It never makes the service send anything elsewhere: its webhook targets a name that never resolves.
import {
  isAppRoute,
  isAppRouteNoBody,
  isAppRouteOtherResponse,
  isZodType,
  type AppRoute,
  type AppRouter,
} from '@ts-rest/core';
import { createClient, memoryTokenStore, type ClientOptions } from './client.js';
import { serverSentEvents, type ServerSentEvent } from './event-stream.js';
import { EventSchema } from './events.js';
import { contract } from './contract.js';

export interface VerifyOptions {
  /** Where the service answers. Self-registration must be enabled there. */
  baseUrl: string;
  /** Called with each result line as it is known; default: nothing (read `results`). */
  log?: (line: string) => void;
  /** The fetch to use; the global one by default. */
  fetch?: typeof fetch;
}

export interface OperationResult {
  /** The contract's name for it, e.g. `tasks.create`. */
  operation: string;
  method: string;
  path: string;
  /** The statuses seen, in order (an operation may be called more than once). */
  statuses: number[];
  passed: boolean;
  /** Why it failed. */
  problems: string[];
}

export interface VerifyReport {
  passed: boolean;
  results: OperationResult[];
}

interface Answer {
  status: number;
  body: unknown;
}

/** Every route of a router, by its dotted name. */
function routesOf(router: AppRouter, prefix = ''): Map<string, AppRoute> {
  const routes = new Map<string, AppRoute>();
  for (const [key, value] of Object.entries(router)) {
    const name = prefix ? `${prefix}.${key}` : key;
    if (isAppRoute(value)) routes.set(name, value);
    else for (const [nested, route] of routesOf(value, name)) routes.set(nested, route);
  }
  return routes;
}

/** What is wrong with an answer to `route`, if anything. */
function mismatches(route: AppRoute, answer: Answer, expected: number): string[] {
  const declared = route.responses[answer.status];
  if (declared === undefined)
    return [`status ${answer.status} is not declared (declared: ${Object.keys(route.responses).join(', ')})`];
  const problems = answer.status === expected ? [] : [`expected ${expected}, got ${answer.status}`];
  if (isAppRouteNoBody(declared)) {
    if (answer.body !== undefined) problems.push('a body where none is declared');
  } else if (isAppRouteOtherResponse(declared)) {
    const text = declared.contentType.startsWith('text/');
    if (text ? typeof answer.body !== 'string' : !(answer.body instanceof Blob))
      problems.push(`the body is not ${declared.contentType}`);
  } else if (isZodType(declared)) {
    const parsed = declared.safeParse(answer.body);
    if (!parsed.success)
      problems.push(...parsed.error.issues.map((issue) => `body.${issue.path.join('.')}: ${issue.message}`));
  }
  return problems;
}

const randomId = () => globalThis.crypto.randomUUID();
/** An id no object has. */
const UNKNOWN_ID = '00000000-0000-7000-8000-000000000000';
/** Where verify's webhook points: a name under .invalid never resolves (RFC 6761), so no delivery leaves the service. */
const VERIFY_WEBHOOK_URL = 'https://task-service-verify.invalid/webhook';

/** The first whole event in a stream's text, if it has arrived: read with the client's own parser. */
async function firstEventIn(text: string): Promise<ServerSentEvent | undefined> {
  const events = serverSentEvents(new Blob([text]).stream());
  const first = await events.next();
  await events.return(undefined);
  return first.done ? undefined : first.value;
}

/**
 * A fetch for the event stream, which never ends by itself: it answers with what the stream sent
 * up to its first event, then hangs up. `opened` is called as soon as the stream's headers arrived.
 */
function untilFirstEvent(fetchImpl: typeof fetch, opened: () => void): typeof fetch {
  return async (input, init) => {
    const response = await fetchImpl(input, init);
    if (!response.ok || !response.body) return response;
    opened();
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let text = '';
    try {
      while (!(await firstEventIn(text))) {
        const { value, done } = await reader.read();
        if (done) break;
        text += decoder.decode(value, { stream: true });
      }
    } finally {
      await reader.cancel();
    }
    return new Response(text, { status: response.status, headers: response.headers });
  };
}

/** Waits (at most 15 s) until a logged attempt has run: succeeded or failed. */
async function untilConcluded(
  client: ReturnType<typeof createClient>,
  webhookId: string,
  deliveryId: string,
): Promise<void> {
  for (let waited = 0; waited < 15_000; waited += 250) {
    const answer = await client.webhooks.deliveries({ params: { webhook_id: webhookId }, query: { limit: 10 } });
    const attempt = answer.status === 200 ? answer.body.items.find((item) => item.id === deliveryId) : undefined;
    if (attempt && (attempt.state === 'succeeded' || attempt.state === 'failed')) return;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** What is wrong with the first event of a stream's text, expected to be of type `type`. */
async function firstEventMismatches(body: unknown, type: string): Promise<string[]> {
  if (typeof body !== 'string') return [];
  const sent = await firstEventIn(body);
  if (!sent) return ['the stream ended before its first event'];
  let data: unknown;
  try {
    data = JSON.parse(sent.data);
  } catch {
    return ['the first event has no JSON data'];
  }
  const event = EventSchema.safeParse(data);
  if (!event.success) return event.error.issues.map((issue) => `event.${issue.path.join('.')}: ${issue.message}`);
  const problems = event.data.type === type ? [] : [`the first event is ${event.data.type}, not ${type}`];
  if (sent.id !== event.data.id || sent.event !== event.data.type)
    problems.push('the id: and event: lines do not match the event');
  return problems;
}

/**
 * Exercises every operation of the contract against the service at `baseUrl` with a throw-away
 * account (deleted at the end), and reports per operation whether every answer was declared and
 * matched its schema.
 */
export async function verify(options: VerifyOptions): Promise<VerifyReport> {
  const routes = routesOf(contract);
  const results = new Map<string, OperationResult>();
  const clientOptions: ClientOptions = {
    baseUrl: options.baseUrl,
    retry: { maxDelayMs: 5000 },
    ...(options.fetch ? { fetch: options.fetch } : {}),
  };
  const session = memoryTokenStore();
  const client = createClient({ ...clientOptions, tokenStore: session });
  const second = createClient(clientOptions);
  // The event stream stays open: this client (in the same session) reads it up to its first event.
  let streamOpened = () => {};
  const opened = new Promise<void>((resolve) => (streamOpened = resolve));
  const streaming = createClient({
    ...clientOptions,
    tokenStore: session,
    timeoutMs: 15_000,
    fetch: untilFirstEvent(options.fetch ?? fetch, () => streamOpened()),
  });

  /** Records one call of `operation`, expecting `expected`; returns the answer when it passed. */
  async function check<A extends Answer>(
    operation: string,
    expected: number,
    call: () => Promise<A>,
    also?: (answer: A) => string[] | Promise<string[]>,
  ): Promise<A | undefined> {
    const route = routes.get(operation);
    if (!route) throw new Error(`No operation ${operation} in the contract`);
    const result = results.get(operation) ?? {
      operation,
      method: route.method,
      path: route.path,
      statuses: [],
      passed: true,
      problems: [],
    };
    results.set(operation, result);
    let answer: A | undefined;
    try {
      answer = await call();
      result.statuses.push(answer.status);
      const wrong = mismatches(route, answer, expected);
      result.problems.push(...(wrong.length === 0 && also ? await also(answer) : wrong));
    } catch (error) {
      result.problems.push(error instanceof Error ? error.message : String(error));
    }
    result.passed = result.problems.length === 0;
    return result.passed ? answer : undefined;
  }
  /** The body of a passed check with status `status`, narrowed; undefined otherwise. */
  const bodyOf = <A extends Answer, S extends number>(
    answer: A | undefined,
    status: S,
  ): Extract<A, { status: S }>['body'] | undefined => (answer && isStatus(answer, status) ? answer.body : undefined);

  await check('service.healthz', 200, () => client.service.healthz());
  await check('service.readyz', 200, () => client.service.readyz());
  await check('service.jwks', 200, () => client.service.jwks());
  await check('docs.openapi', 200, () => client.docs.openapi());
  await check('docs.reference', 200, () => client.docs.reference());
  await check('docs.problems', 200, () => client.docs.problems());
  await check('docs.problem', 200, () => client.docs.problem({ params: { code: 'precondition_failed' } }));
  await check('docs.problem', 404, () => client.docs.problem({ params: { code: 'no_such_code' } }));

  const email = `verify-${randomId()}@example.com`;
  const password = `${randomId()}-${randomId()}`;
  const account = bodyOf(
    await check('auth.register', 201, () =>
      client.auth.register({ body: { email, password, name: 'Contract verification' } }),
    ),
    201,
  );
  if (account) {
    const userId = account.user.id;
    // A second session, to exercise login, refresh and logout without ending the first.
    await check('auth.login', 200, () => second.auth.login({ body: { email, password } }));
    const refreshToken = second.tokens()?.refreshToken;
    if (refreshToken) await check('auth.refresh', 200, () => second.auth.refresh({ body: { refreshToken } }));
    await check('auth.logout', 204, () => second.auth.logout());
    await check('auth.me', 200, () => client.auth.me());

    // A personal access token: managed with the login's session, used by a client of its own within its scope.
    const pat = bodyOf(
      await check('personalAccessTokens.create', 201, () =>
        client.personalAccessTokens.create({
          body: { name: 'Contract verification', scopes: ['tasks:read'], expiresInDays: 1 },
        }),
      ),
      201,
    );
    await check('personalAccessTokens.list', 200, () => client.personalAccessTokens.list({ query: {} }));
    if (pat) {
      const params = { token_id: pat.id };
      await check('personalAccessTokens.get', 200, () => client.personalAccessTokens.get({ params }));
      const scripted = createClient({ ...clientOptions, personalAccessToken: pat.token });
      await check('tasks.list', 200, () => scripted.tasks.list());
      await check(
        'users.list',
        403,
        () => scripted.users.list(),
        (answer) =>
          answer.status === 403 && answer.body.code !== 'insufficient_scope'
            ? [`${answer.body.code}, not insufficient_scope`]
            : [],
      );
      await check('personalAccessTokens.remove', 204, () => client.personalAccessTokens.remove({ params }));
      await check('personalAccessTokens.get', 404, () => client.personalAccessTokens.get({ params }));
    }

    // Apps connected with OAuth: the throw-away account approved none, so its list is empty and a
    // grant that is not its own is 404.
    await check('oauthGrants.list', 200, () => client.oauthGrants.list());
    await check('oauthGrants.remove', 404, () => client.oauthGrants.remove({ params: { grant_id: UNKNOWN_ID } }));

    // A user who is not an admin: listing and creating users are forbidden.
    await check('users.list', 403, () => client.users.list());
    await check('users.create', 403, () =>
      client.users.create({ body: { email: `verify-${randomId()}@example.com`, password, name: 'Never created' } }),
    );
    await check('users.get', 200, () => client.users.get({ params: { user_id: userId } }));
    await check('users.replace', 200, () =>
      client.users.replace({ params: { user_id: userId }, body: { email, name: 'Contract verification (replaced)' } }),
    );
    await check('users.update', 200, () =>
      client.users.update({ params: { user_id: userId }, body: { name: 'Contract verification' } }),
    );

    // A webhook and a live stream, which the next change (a new tag) must both reach. The webhook's
    // target is under .invalid (RFC 6761), which never resolves: the service logs its attempts as
    // failed and never POSTs anything to anyone, whichever service this runs against.
    const webhook = bodyOf(
      await check('webhooks.create', 201, () =>
        client.webhooks.create({
          body: {
            url: VERIFY_WEBHOOK_URL,
            events: ['tag.created'],
            description: 'Contract verification (a target that never resolves)',
          },
        }),
      ),
      201,
    );
    await check('events.stream', 410, () => client.events.stream({ headers: { 'last-event-id': UNKNOWN_ID } }));
    const streamed = check(
      'events.stream',
      200,
      () => streaming.events.stream(),
      (answer) => firstEventMismatches(answer.body, 'tag.created'),
    );
    await Promise.race([opened, streamed]);
    const tag = bodyOf(
      await check('tags.create', 201, () => client.tags.create({ body: { name: 'verify', color: '#3366ff' } })),
      201,
    );
    await streamed;
    await check(
      'events.changes',
      200,
      () => client.events.changes({ query: { limit: 100 } }),
      (answer) =>
        answer.status === 200 &&
        tag &&
        !answer.body.items.some((event) => event.type === 'tag.created' && event.data.tag.id === tag.id)
          ? ['the new tag is not in the feed']
          : [],
    );
    if (webhook) {
      const params = { webhook_id: webhook.id };
      await check('webhooks.list', 200, () => client.webhooks.list({ query: { limit: 10 } }));
      await check('webhooks.get', 200, () => client.webhooks.get({ params }));
      await check('webhooks.update', 200, () =>
        client.webhooks.update({ params, body: { description: 'Contract verification (updated)' } }),
      );
      // The delivery is recorded with the change itself, so it is in the log at once.
      const log = bodyOf(
        await check(
          'webhooks.deliveries',
          200,
          () => client.webhooks.deliveries({ params, query: { limit: 10 } }),
          (answer) =>
            answer.status === 200 && answer.body.items.length === 0 ? ['no delivery of the new tag was logged'] : [],
        ),
        200,
      );
      // A retry while the first attempt is still due or in flight is 409 (one attempt at a time):
      // wait for its outcome (a failure, at once: the name does not resolve) before asking for another.
      const delivery = log?.items[0];
      if (delivery) {
        await untilConcluded(client, webhook.id, delivery.id);
        await check('webhooks.retry', 202, () =>
          client.webhooks.retry({ params: { ...params, delivery_id: delivery.id } }),
        );
      }
      await check('webhooks.retry', 404, () =>
        client.webhooks.retry({ params: { ...params, delivery_id: UNKNOWN_ID } }),
      );
      await check('webhooks.remove', 204, () => client.webhooks.remove({ params }));
      await check('webhooks.get', 404, () => client.webhooks.get({ params }));
    }
    const other = bodyOf(
      await check('tags.create', 201, () => client.tags.create({ body: { name: 'verify-2' } })),
      201,
    );
    await check('tags.list', 200, () => client.tags.list({ query: { limit: 10 } }));
    if (tag) {
      await check('tags.get', 200, () => client.tags.get({ params: { tag_id: tag.id } }));
      await check('tags.update', 200, () =>
        client.tags.update({ params: { tag_id: tag.id }, body: { color: '#ff6633' } }),
      );
    }

    const task = bodyOf(
      await check('tasks.create', 201, () =>
        client.tasks.create({
          body: {
            title: 'Verify the contract',
            priority: 'high',
            dueAt: '2030-01-01T09:00:00Z',
            tagIds: tag ? [tag.id] : [],
          },
        }),
      ),
      201,
    );
    await check('tasks.list', 200, () =>
      client.tasks.list({ query: { status: ['todo', 'in_progress'], sort: '-priority', limit: 5 } }),
    );
    await check('users.listTasks', 200, () =>
      client.users.listTasks({ params: { user_id: userId }, query: { relation: 'owner' } }),
    );
    if (task) {
      const params = { task_id: task.id };
      await check('tasks.get', 200, () => client.tasks.get({ params }));
      await check('tasks.get', 304, () =>
        client.tasks.get({ params, headers: { 'if-none-match': `"${task.version}"` } }),
      );
      const replaced = bodyOf(
        await check('tasks.replace', 200, () =>
          client.tasks.replace({
            params,
            headers: { 'if-match': `"${task.version}"` },
            body: {
              title: 'Verify the contract',
              description: 'Replaced',
              status: 'in_progress',
              priority: 'high',
              dueAt: null,
              assigneeId: null,
            },
          }),
        ),
        200,
      );
      await check('tasks.update', 412, () =>
        client.tasks.update({ params, headers: { 'if-match': `"${task.version}"` }, body: { status: 'done' } }),
      );
      await check('tasks.update', 200, () =>
        client.tasks.update({
          params,
          ...(replaced ? { headers: { 'if-match': `"${replaced.version}"` } } : {}),
          body: { status: 'done' },
        }),
      );

      await check('tags.listForTask', 200, () => client.tags.listForTask({ params }));
      if (other) {
        await check('tags.addToTask', 201, () => client.tags.addToTask({ params: { ...params, tag_id: other.id } }));
        await check('tags.removeFromTask', 204, () =>
          client.tags.removeFromTask({ params: { ...params, tag_id: other.id } }),
        );
      }

      // A subtask, related to its parent: it blocks the parent until done.
      const subtask = bodyOf(
        await check('tasks.create', 201, () =>
          client.tasks.create({ body: { title: 'Verify a subtask', parentId: task.id } }),
        ),
        201,
      );
      if (subtask) {
        const relation = { type: 'blocks' as const, taskId: task.id };
        const subtaskParams = { task_id: subtask.id };
        await check('relations.create', 201, () => client.relations.create({ params: subtaskParams, body: relation }));
        await check('relations.create', 200, () => client.relations.create({ params: subtaskParams, body: relation }));
        await check('relations.list', 200, () => client.relations.list({ params }));
        await check('relations.remove', 204, () =>
          client.relations.remove({ params: { ...params, type: 'blocked_by', other_id: subtask.id } }),
        );
        await check('relations.remove', 404, () =>
          client.relations.remove({ params: { ...params, type: 'blocked_by', other_id: subtask.id } }),
        );
      }

      const text = 'Contract verification\n';
      const attachment = bodyOf(
        await check('attachments.upload', 201, () =>
          client.attachments.upload({ params, body: { file: new File([text], 'verify.txt', { type: 'text/plain' }) } }),
        ),
        201,
      );
      await check('attachments.listForTask', 200, () => client.attachments.listForTask({ params }));
      if (attachment) {
        const attachParams = { attach_id: attachment.id };
        await check('attachments.get', 200, () => client.attachments.get({ params: attachParams }));
        await check('attachments.download', 200, () => client.attachments.download({ params: attachParams }));
        await check('attachments.download', 206, () =>
          client.attachments.download({ params: attachParams, headers: { range: 'bytes=0-7' } }),
        );
        await check('attachments.remove', 204, () => client.attachments.remove({ params: attachParams }));
      }

      const comment = bodyOf(
        await check('comments.create', 201, () =>
          client.comments.create({ params, body: { body: 'Verified *here*' } }),
        ),
        201,
      );
      await check('comments.listForTask', 200, () => client.comments.listForTask({ params, query: {} }));
      if (comment) {
        const commentParams = { comment_id: comment.id };
        await check('comments.get', 200, () => client.comments.get({ params: commentParams }));
        await check('comments.update', 200, () =>
          client.comments.update({ params: commentParams, body: { body: 'Verified, edited' } }),
        );
        await check('comments.remove', 204, () => client.comments.remove({ params: commentParams }));
      }
      await check('comments.get', 404, () => client.comments.get({ params: { comment_id: UNKNOWN_ID } }));
      await check('activity.listForTask', 200, () => client.activity.listForTask({ params, query: { limit: 5 } }));
      await check('tasks.get', 404, () => client.tasks.get({ params: { task_id: UNKNOWN_ID } }));
      await check('tasks.remove', 204, () => client.tasks.remove({ params }));
    }

    // A project of the throw-away account alone: its members' checks answer the account itself.
    const project = bodyOf(
      await check('projects.create', 201, () =>
        client.projects.create({ body: { name: 'Contract verification', description: 'Made by verify()' } }),
      ),
      201,
    );
    await check('projects.list', 200, () => client.projects.list({ query: { q: 'verification', limit: 10 } }));
    if (project) {
      const params = { project_id: project.id };
      const self = { ...params, user_id: userId };
      await check('projects.get', 200, () => client.projects.get({ params }));
      await check('projects.update', 412, () =>
        client.projects.update({ params, headers: { 'if-match': '"999"' }, body: { name: 'Stale' } }),
      );
      await check('projects.update', 200, () =>
        client.projects.update({
          params,
          headers: { 'if-match': `"${project.version}"` },
          body: { name: 'Contract verification (renamed)' },
        }),
      );
      await check('projects.listMembers', 200, () => client.projects.listMembers({ params, query: { limit: 10 } }));
      // A project's tag and task: the project goes with them below.
      const projectTag = bodyOf(
        await check('tags.create', 201, () =>
          client.tags.create({ body: { name: 'verify-project', projectId: project.id } }),
        ),
        201,
      );
      await check('tasks.create', 201, () =>
        client.tasks.create({
          body: { title: 'Verify a project task', projectId: project.id, tagIds: projectTag ? [projectTag.id] : [] },
        }),
      );
      await check('tasks.list', 200, () => client.tasks.list({ query: { projectId: project.id, limit: 5 } }));
      await check('tags.list', 200, () => client.tags.list({ query: { projectId: project.id, limit: 5 } }));
      await check('projects.addMember', 409, () =>
        client.projects.addMember({ params, body: { userId, role: 'viewer' } }),
      );
      await check('projects.addMember', 404, () =>
        client.projects.addMember({ params, body: { email: `verify-${randomId()}@example.com`, role: 'viewer' } }),
      );
      await check('projects.updateMember', 200, () =>
        client.projects.updateMember({ params: self, body: { role: 'admin' } }),
      );
      await check('projects.updateMember', 409, () =>
        client.projects.updateMember({ params: self, body: { role: 'viewer' } }),
      );
      await check('projects.removeMember', 409, () => client.projects.removeMember({ params: self }));
      await check('projects.remove', 204, () => client.projects.remove({ params }));
      await check('projects.get', 404, () => client.projects.get({ params }));
    }
    if (tag) await check('tags.remove', 204, () => client.tags.remove({ params: { tag_id: tag.id } }));
    if (other) await check('tags.remove', 204, () => client.tags.remove({ params: { tag_id: other.id } }));
    await check('users.remove', 204, () => client.users.remove({ params: { user_id: userId } }));
  }

  // An operation never reached (a step it needs failed, or it is new to the contract) fails too.
  const report: OperationResult[] = [...routes].map(
    ([operation, route]) =>
      results.get(operation) ?? {
        operation,
        method: route.method,
        path: route.path,
        statuses: [],
        passed: false,
        problems: ['not exercised'],
      },
  );
  for (const result of report) options.log?.(formatResult(result));
  return { passed: report.every((result) => result.passed), results: report };
}

function isStatus<A extends Answer, S extends number>(answer: A, status: S): answer is Extract<A, { status: S }> {
  return answer.status === status;
}

/** `PASS tasks.create  POST /tasks  201` or `FAIL …  why`. */
export const formatResult = (result: OperationResult): string =>
  `${result.passed ? 'PASS' : 'FAIL'} ${result.operation.padEnd(24)} ${`${result.method} ${result.path}`.padEnd(44)} ${result.statuses.join(',') || '-'}${
    result.passed ? '' : `  ${result.problems.join('; ')}`
  }`;
