// The personal access token format, as GitHub's: `tsk_pat_` + 32 random bytes in base62 (43 characters,
// zero-padded) + the CRC32 of those 43 characters in base62 (6 characters, zero-padded). Secret
// scanners recognise the prefix; the checksum rejects a typo without a database look-up.
import { createHash, randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { PERSONAL_ACCESS_TOKEN_PREFIX } from '@task-service/client';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const RANDOM_LENGTH = 43;
const CHECKSUM_LENGTH = 6;
const shapeOf = (prefix: string) =>
  new RegExp(`^${prefix}([0-9A-Za-z]{${RANDOM_LENGTH}})([0-9A-Za-z]{${CHECKSUM_LENGTH}})$`);
const SHAPE = shapeOf(PERSONAL_ACCESS_TOKEN_PREFIX);

function base62(value: bigint, length: number): string {
  let text = '';
  for (let rest = value; rest > 0n; rest /= 62n) text = BASE62[Number(rest % 62n)] + text;
  return text.padStart(length, '0');
}

const checksumOf = (random: string): string => base62(BigInt(crc32(random)), CHECKSUM_LENGTH);

/** A new token in this format under `prefix`: shown to its holder once, stored only as its hash. */
export function newPrefixedToken(prefix: string): { token: string; prefix: string } {
  const random = base62(BigInt(`0x${randomBytes(32).toString('hex')}`), RANDOM_LENGTH);
  return { token: `${prefix}${random}${checksumOf(random)}`, prefix: `${prefix}${random.slice(0, 4)}` };
}

export const newPersonalAccessToken = () => newPrefixedToken(PERSONAL_ACCESS_TOKEN_PREFIX);

/** Whether `token` has this format under `prefix` and its checksum matches. */
export function isWellFormedPrefixedToken(prefix: string, token: string): boolean {
  const parts = (prefix === PERSONAL_ACCESS_TOKEN_PREFIX ? SHAPE : shapeOf(prefix)).exec(token);
  return parts !== null && parts[1] !== undefined && checksumOf(parts[1]) === parts[2];
}

/** Whether a bearer value claims to be a personal access token (then it is never checked as a JWT). */
export const looksLikePersonalAccessToken = (value: string): boolean => value.startsWith(PERSONAL_ACCESS_TOKEN_PREFIX);

/** Whether the token has the format and its checksum matches. */
export const isWellFormedToken = (token: string): boolean =>
  isWellFormedPrefixedToken(PERSONAL_ACCESS_TOKEN_PREFIX, token);

/** Tokens are stored only as this hash. */
export const hashPersonalAccessToken = (token: string): string => createHash('sha256').update(token).digest('hex');
