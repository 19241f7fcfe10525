// `@task-service/client/validate`: answers checked against the contract's schemas, for those who want
// it: `createClient({ baseUrl, validate: validateAnswers })`. It brings zod and every schema, which
// the client alone does not, so a browser bundle pays for it only when it asks.
import {
  isAppRoute,
  isAppRouteNoBody,
  isAppRouteOtherResponse,
  isZodType,
  type AppRoute,
  type AppRouter,
} from '@ts-rest/core';
import type { AnswerValidator } from './call.js';
import { contract } from './contract.js';

function routeOf(operation: string): AppRoute | undefined {
  let entry: AppRouter | AppRoute = contract;
  for (const name of operation.split('.')) {
    if (isAppRoute(entry)) return undefined;
    const next: AppRouter | AppRoute | undefined = entry[name];
    if (next === undefined) return undefined;
    entry = next;
  }
  return isAppRoute(entry) ? entry : undefined;
}

/** Parses a JSON answer with the schema the contract declares for its status (a mismatch throws a ZodError). */
export const validateAnswers: AnswerValidator = (operation, status, body) => {
  const declared = routeOf(operation)?.responses[status];
  if (declared === undefined || isAppRouteNoBody(declared) || isAppRouteOtherResponse(declared) || !isZodType(declared))
    return body;
  return declared.parse(body);
};
