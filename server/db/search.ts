/** `text` with ILIKE's wildcards (%, _) and its escape (\) escaped, so that each matches itself. */
const literalForLike = (text: string): string => text.replace(/[\\%_]/g, '\\$&');

/** The ILIKE pattern of a case-insensitive substring search for a user's text. */
export const containsPattern = (text: string): string => `%${literalForLike(text)}%`;
