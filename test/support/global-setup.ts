import { prepareTemplates, removeTemplates } from './databases.js';

// Vitest calls global setup for the root and again for each project, in one process: the
// templates are built once and shared.
declare global {
  var taskServiceTemplates: Promise<void> | undefined;
}

export default async function setup(): Promise<() => Promise<void>> {
  globalThis.taskServiceTemplates ??= prepareTemplates();
  await globalThis.taskServiceTemplates;
  return removeTemplates;
}
