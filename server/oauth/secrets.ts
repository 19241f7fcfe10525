// The OAuth secrets this server hands out, each stored only as its SHA-256 hash. Access and refresh
// tokens have the personal access tokens' format (base62 + CRC32) under their own prefixes, so
// secret scanners recognise them and a typo is refused without a database look-up.
import { createHash, randomBytes } from 'node:crypto';
import { isWellFormedPrefixedToken, newPrefixedToken } from '../tokens/format.js';

export const ACCESS_TOKEN_PREFIX = 'tsk_oat_';
export const REFRESH_TOKEN_PREFIX = 'tsk_ort_';

export const newAccessToken = (): string => newPrefixedToken(ACCESS_TOKEN_PREFIX).token;
export const newRefreshToken = (): string => newPrefixedToken(REFRESH_TOKEN_PREFIX).token;
/** An authorization code: 256 bits of randomness, single-use, 60 s. */
export const newAuthorizationCode = (): string => randomBytes(32).toString('base64url');
/** A confidential client's secret. */
export const newClientSecret = (): string => randomBytes(32).toString('base64url');

export const looksLikeOAuthAccessToken = (value: string): boolean => value.startsWith(ACCESS_TOKEN_PREFIX);
export const isWellFormedAccessToken = (value: string): boolean =>
  isWellFormedPrefixedToken(ACCESS_TOKEN_PREFIX, value);
export const isWellFormedRefreshToken = (value: string): boolean =>
  isWellFormedPrefixedToken(REFRESH_TOKEN_PREFIX, value);

export const hashSecret = (secret: string): string => createHash('sha256').update(secret).digest('hex');
