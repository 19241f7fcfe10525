// The interface of the task service: the server implements it, the OpenAPI document is generated
// from it, and clients import it. Depends only on @ts-rest/core and zod.
import { c } from './common.js';
import { attachmentsContract } from './attachments.js';
import { authContract } from './auth.js';
import { docsContract } from './docs.js';
import { eventsContract } from './events.js';
import { serviceContract } from './service.js';
import { tagsContract } from './tags.js';
import { tasksContract } from './tasks.js';
import { personalAccessTokensContract } from './tokens.js';
import { usersContract } from './users.js';
import { webhooksContract } from './webhooks.js';

export const contract = c.router({
  auth: authContract,
  users: usersContract,
  tasks: tasksContract,
  tags: tagsContract,
  attachments: attachmentsContract,
  events: eventsContract,
  webhooks: webhooksContract,
  personalAccessTokens: personalAccessTokensContract,
  service: serviceContract,
  docs: docsContract,
});
export type Contract = typeof contract;

export * from './common.js';
export * from './attachments.js';
export * from './auth.js';
export * from './answers.js';
export * from './client.js';
export * from './pages.js';
export * from './problems.js';
export type { RetryOptions } from './retry.js';
export * from './docs.js';
export * from './events.js';
export { serverSentEvents, subscribeToEvents, type ServerSentEvent, type SubscribeOptions } from './event-stream.js';
export * from './service.js';
export * from './tags.js';
export * from './tasks.js';
export * from './scopes.js';
export * from './tokens.js';
export * from './users.js';
export * from './verify.js';
export * from './webhooks.js';
export * from './webhook-signature.js';
