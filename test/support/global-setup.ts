import { prepareTemplates } from './databases.js';

export default async function setup(): Promise<void> {
  await prepareTemplates();
}
