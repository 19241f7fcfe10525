import type { Prisma } from '../generated/prisma/client.js';

/** `text` with ILIKE's wildcards (%, _) and its escape (\) escaped, so that each matches itself. */
const literalForLike = (text: string): string => text.replace(/[\\%_]/g, '\\$&');

/** The ILIKE pattern of a case-insensitive substring search for a user's text. */
export const containsPattern = (text: string): string => `%${literalForLike(text)}%`;

/** A case-insensitive substring match for a user's search text, as a Prisma filter (passed to ILIKE). */
export const containsText = (text: string): Prisma.StringFilter => ({
  contains: literalForLike(text),
  mode: 'insensitive',
});
