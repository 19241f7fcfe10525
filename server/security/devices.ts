import { randomUUID } from 'node:crypto';
import type { CursorCodec } from '../http/pagination.js';
import type { ClaimedDevice } from './throttle.js';

// Device tokens (OWASP's device cookies), signed by the service as its cursors are, under their own name.
const DEVICE_TOKEN = 'device';

/** A signed token naming the account and the device (a new one unless `deviceId` is known). */
export const deviceTokenFor = (signer: CursorCodec, userId: string, deviceId: string = randomUUID()): string =>
  signer.seal(DEVICE_TOKEN, `${userId} ${deviceId}`);

/**
 * What a token the service signed claims: an account and a device. The claim counts only for that
 * account (the login's email must be its), which the login decides with its account in hand.
 */
export function claimedDevice(signer: CursorCodec, token: string): ClaimedDevice | undefined {
  const [account, deviceId, ...rest] = signer.unseal(DEVICE_TOKEN, token)?.split(' ') ?? [];
  return account && deviceId && rest.length === 0 ? { account, deviceId } : undefined;
}
