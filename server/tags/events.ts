import type { OutboxEvent } from '../events/outbox.js';

export const tagDeleted = (row: { id: string; ownerId: string }): OutboxEvent => ({
  type: 'tag.deleted',
  data: { tagId: row.id },
  audience: [row.ownerId],
});
