import { v7 as uuidv7 } from 'uuid';
import type { Selection } from 'kysely';
import type { Role } from '@task-service/client';
import type { AppContext } from '../context.js';
import { isUniqueViolation } from '../db/errors.js';
import { tables, type DB } from '../db/query.js';
import { NOT_DURABLE } from '../security/throttle.js';
import { AppError } from '../http/errors.js';
import { userColumns, type UserRow } from './serialize.js';

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
    return await ctx.db.sql.transaction(async (tx) => {
      const created = await tx.first(
        tables
          .insertInto('users')
          .values({
            id: uuidv7(),
            email: input.email,
            name: input.name,
            role: input.role ?? 'user',
            password_hash: passwordHash,
            created_at: now,
            updated_at: now,
          })
          .returning(userColumns),
      );
      if (!created) throw new Error('INSERT … RETURNING answered no row');
      return created;
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw emailTaken();
    throw error;
  }
}

/** An account as a login checks it: the User's columns and the password's hash. */
export const accountColumns = [...userColumns, 'users.password_hash as passwordHash'] as const;

export type AccountRow = Selection<DB, 'users', (typeof accountColumns)[number]>;

/** The account with this (normalised) email: a step of the login's pipeline. */
export const accountByEmail = (email: string) =>
  tables.selectFrom('users').select(accountColumns).where('users.email', '=', email);

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
  const existing = await ctx.db.sql.first(
    tables.selectFrom('users').select(userColumns).where('users.email', '=', admin.email),
  );
  if (existing) {
    if (existing.role === 'admin' || !promoteExisting) return existing;
    const promoted = await ctx.db.sql.first(
      tables
        .updateTable('users')
        .set({ role: 'admin', updated_at: new Date() })
        .where('users.id', '=', existing.id)
        .returning(userColumns),
    );
    if (!promoted) throw new Error(`the account ${admin.email} was deleted while being promoted`);
    return promoted;
  }
  try {
    return await createAccount(ctx, { ...admin, role: 'admin' });
  } catch (error) {
    // Another instance starting at the same moment created it.
    if (error instanceof AppError && error.code === 'email_taken') return ensureAdmin(ctx, admin, { promoteExisting });
    throw error;
  }
}

/** The password check, or, without an account, the time of one, so an unknown email cannot be told from a wrong password. */
export async function passwordMatches(
  ctx: AppContext,
  user: AccountRow | undefined,
  password: string,
): Promise<boolean> {
  if (user) return ctx.passwords.verify(user.passwordHash, password);
  await ctx.passwords.burn(password);
  return false;
}

/**
 * Checks a known account's password outside a login (a password change) under the same throttle:
 * a failure counts against the account and the address, a success gives the attempt back.
 */
export async function passwordAccepted(
  ctx: AppContext,
  user: AccountRow,
  password: string,
  address: string,
): Promise<boolean> {
  const taken = await ctx.loginThrottle.begin(user.email, address);
  const valid = await passwordMatches(ctx, user, password);
  if (valid) await ctx.db.sql.pipeline({ settle: ctx.loginThrottle.succeeded(taken) }, NOT_DURABLE);
  return valid;
}
