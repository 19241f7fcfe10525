import { Prisma } from '../generated/prisma/client.js';

/** A unique constraint was violated (Prisma P2002). */
export const isUniqueViolation = (error: unknown): boolean =>
  error instanceof Prisma.PrismaClientKnownRequestError && error.code === 'P2002';

/** A referenced row does not exist (Prisma P2003), or the row to change is gone (P2025). */
export const isMissingRow = (error: unknown): boolean =>
  error instanceof Prisma.PrismaClientKnownRequestError && (error.code === 'P2003' || error.code === 'P2025');
