import { Prisma } from '../generated/prisma/client.js';

// PostgreSQL's own codes: pglite-prisma-adapter passes them through as the cause of a
// DriverAdapterError instead of letting Prisma map them to P2002/P2003.
const UNIQUE_VIOLATION = '23505';
const FOREIGN_KEY_VIOLATION = '23503';

function postgresCode(error: unknown): string | undefined {
  if (!(error instanceof Error) || !(error.cause instanceof Object) || !('code' in error.cause)) return undefined;
  return typeof error.cause.code === 'string' ? error.cause.code : undefined;
}

const prismaCode = (error: unknown): string | undefined =>
  error instanceof Prisma.PrismaClientKnownRequestError ? error.code : undefined;

/** A unique constraint was violated. */
export const isUniqueViolation = (error: unknown): boolean =>
  prismaCode(error) === 'P2002' || postgresCode(error) === UNIQUE_VIOLATION;

/** A referenced row does not exist, or the row to change is gone. */
export const isMissingRow = (error: unknown): boolean =>
  prismaCode(error) === 'P2003' || prismaCode(error) === 'P2025' || postgresCode(error) === FOREIGN_KEY_VIOLATION;
