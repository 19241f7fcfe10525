// The types of events, in a module of their own: the client reads them at run time without zod.
export const EVENT_TYPES = [
  'task.created',
  'task.updated',
  'task.deleted',
  'attachment.created',
  'attachment.deleted',
  'tag.created',
  'tag.updated',
  'tag.deleted',
  'user.updated',
  'user.deleted',
  'project.created',
  'project.updated',
  'project.deleted',
  'project.member_added',
  'project.member_updated',
  'project.member_removed',
] as const;
