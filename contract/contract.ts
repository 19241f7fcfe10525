// The whole contract: every group of operations under its name.
import { c } from './common.js';
import { activityContract } from './activity.js';
import { attachmentsContract } from './attachments.js';
import { commentsContract } from './comments.js';
import { authContract } from './auth.js';
import { docsContract } from './docs.js';
import { eventsContract } from './events.js';
import { projectsContract } from './projects.js';
import { relationsContract } from './relations.js';
import { serviceContract } from './service.js';
import { tagsContract } from './tags.js';
import { tasksContract } from './tasks.js';
import { oauthGrantsContract } from './oauth.js';
import { personalAccessTokensContract } from './tokens.js';
import { usersContract } from './users.js';
import { webhooksContract } from './webhooks.js';

/** The whole contract, by name: declaration files refer to each group rather than spelling it out again. */
// A type literal, not an interface: ts-rest's AppRouter needs an index signature.
export type Contract = {
  auth: typeof authContract;
  users: typeof usersContract;
  tasks: typeof tasksContract;
  tags: typeof tagsContract;
  projects: typeof projectsContract;
  relations: typeof relationsContract;
  attachments: typeof attachmentsContract;
  comments: typeof commentsContract;
  activity: typeof activityContract;
  events: typeof eventsContract;
  webhooks: typeof webhooksContract;
  personalAccessTokens: typeof personalAccessTokensContract;
  oauthGrants: typeof oauthGrantsContract;
  service: typeof serviceContract;
  docs: typeof docsContract;
};

export const contract: Contract = c.router({
  auth: authContract,
  users: usersContract,
  tasks: tasksContract,
  tags: tagsContract,
  projects: projectsContract,
  relations: relationsContract,
  attachments: attachmentsContract,
  comments: commentsContract,
  activity: activityContract,
  events: eventsContract,
  webhooks: webhooksContract,
  personalAccessTokens: personalAccessTokensContract,
  oauthGrants: oauthGrantsContract,
  service: serviceContract,
  docs: docsContract,
});
