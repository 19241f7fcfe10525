import type { OutboxEvent } from '../events/outbox.js';
import { serializeUser, type UserRow } from './serialize.js';

export const userUpdated = (row: UserRow): OutboxEvent => ({
  type: 'user.updated',
  data: { user: serializeUser(row) },
  audience: [row.id],
});

export const userDeleted = (userId: string): OutboxEvent => ({
  type: 'user.deleted',
  data: { userId },
  audience: [userId],
});
