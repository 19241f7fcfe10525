import type { User } from '@task-service/client';
import type { Selection } from 'kysely';
import type { DB } from '../db/query.js';

/** The columns a User is made of, for every query that reads an account to show it. */
export const userColumns = [
  'users.id',
  'users.email',
  'users.name',
  'users.role',
  'users.created_at as createdAt',
  'users.updated_at as updatedAt',
] as const;

export type UserRow = Selection<DB, 'users', (typeof userColumns)[number]>;

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
