// The interface of the task service: the server implements it, the OpenAPI document is generated
// from it, and clients import it. Depends only on @ts-rest/core and zod.
export * from './contract.js';
export * from './common.js';
export * from './activity.js';
export * from './attachments.js';
export * from './comments.js';
export * from './auth.js';
export * from './answers.js';
export * from './client.js';
export type { AnswerValidator, CallArgs } from './call.js';
export * from './oauth.js';
export * from './pages.js';
export * from './problems.js';
export type { RetryOptions } from './retry.js';
export * from './docs.js';
export * from './events.js';
export { serverSentEvents, subscribeToEvents, type ServerSentEvent, type SubscribeOptions } from './event-stream.js';
export * from './projects.js';
export * from './relations.js';
export * from './service.js';
export * from './tags.js';
export * from './tasks.js';
export * from './scopes.js';
export * from './tokens.js';
export * from './users.js';
export * from './verify.js';
export * from './webhooks.js';
export * from './webhook-signature.js';
