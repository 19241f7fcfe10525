import { v7 as uuidv7 } from 'uuid';
import { RoleSchema, type Role } from '@task-service/client';
import type { AppContext } from '../context.js';
import { isUniqueViolation } from '../db/errors.js';
import { rowsOf, type Statement } from '../db/sql.js';
import { inTransaction } from '../db/transactions.js';
import type { User as UserRow } from '../generated/prisma/client.js';
import { AppError } from '../http/errors.js';

export const emailTaken = () => new AppError('email_taken', 'An account with this email already exists');

/** Creates an account; the email arrives normalised by the contract. */
/** What account creation needs: the database and the password hasher, not the whole service. */
export type Accounts = Pick<AppContext, 'db' | 'passwords'>;

export async function createAccount(
  ctx: Accounts,
  input: { email: string; password: string; name: string; role?: Role },
): Promise<UserRow> {
  const passwordHash = await ctx.passwords.hash(input.password);
  const now = new Date();
  try {
    // A transaction, though of one statement: under an Idempotency-Key it commits with the answer.
    return await inTransaction(ctx.db.prisma, (tx) =>
      tx.user.create({
        data: {
          id: uuidv7(),
          email: input.email,
          name: input.name,
          role: input.role ?? 'user',
          passwordHash,
          createdAt: now,
          updatedAt: now,
        },
      }),
    );
  } catch (error) {
    if (isUniqueViolation(error)) throw emailTaken();
    throw error;
  }
}

interface AccountRow {
  id: string;
  email: string;
  name: string;
  role: string;
  password_hash: string;
  created_at: Date;
  updated_at: Date;
}

/** The statement reading the account with this (normalised) email: plain SQL, as every login asks it. */
export const accountByEmail = (email: string): Statement => ({
  text: 'SELECT id, email, name, role, password_hash, created_at, updated_at FROM users WHERE email = $1',
  values: [email],
});

/** The account of `accountByEmail`'s rows, if there is one. */
export function accountOf(rows: unknown[] | undefined): UserRow | undefined {
  const [row] = rowsOf<AccountRow>(rows);
  if (!row) return undefined;
  const { password_hash: passwordHash, created_at: createdAt, updated_at: updatedAt, ...rest } = row;
  return { ...rest, role: RoleSchema.parse(row.role), passwordHash, createdAt, updatedAt };
}

/**
 * Makes sure an account with the administrator's email exists: created as an admin when no account
 * has that email. An existing account is left as it is (its password too), unless the operator asks
 * for exactly a promotion (`npm run create-admin`). From configuration it is never promoted: it may
 * have been registered by someone else, or demoted on purpose; the caller says so.
 */
export async function ensureAdmin(
  ctx: Accounts,
  admin: { email: string; password: string; name: string },
  { promoteExisting }: { promoteExisting: boolean },
): Promise<UserRow> {
  const existing = await ctx.db.prisma.user.findUnique({ where: { email: admin.email } });
  if (existing) {
    if (existing.role === 'admin' || !promoteExisting) return existing;
    return ctx.db.prisma.user.update({ where: { id: existing.id }, data: { role: 'admin', updatedAt: new Date() } });
  }
  try {
    return await createAccount(ctx, { ...admin, role: 'admin' });
  } catch (error) {
    // Another instance starting at the same moment created it.
    if (error instanceof AppError && error.code === 'email_taken') return ensureAdmin(ctx, admin, { promoteExisting });
    throw error;
  }
}
