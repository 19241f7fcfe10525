import type { Prisma } from '../generated/prisma/client.js';

/**
 * A case-insensitive substring match for a user's search text. Prisma passes `contains` to ILIKE
 * unescaped, so %, _ and \ are escaped to match themselves.
 */
export const containsText = (text: string): Prisma.StringFilter => ({
  contains: text.replace(/[\\%_]/g, '\\$&'),
  mode: 'insensitive',
});
