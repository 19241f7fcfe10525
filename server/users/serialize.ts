import type { User } from '@task-service/client';
import type { User as UserRow } from '../generated/prisma/client.js';

export function serializeUser(row: UserRow): User {
  return {
    id: row.id,
    email: row.email,
    name: row.name,
    role: row.role,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}
