import { randomUUID } from 'node:crypto';
import type { CursorCodec } from '../http/pagination.js';

// Device tokens (OWASP's device cookies), signed by the service as its cursors are, under their own name.
const DEVICE_TOKEN = 'device';

/** A signed token naming the account and the device (a new one unless `deviceId` is known). */
export const deviceTokenFor = (signer: CursorCodec, userId: string, deviceId: string = randomUUID()): string => signer.seal(DEVICE_TOKEN, `${userId} ${deviceId}`);

/** The device a token names, when the service signed it for this account; otherwise undefined (no device). */
export function knownDevice(signer: CursorCodec, token: string, userId: string): string | undefined {
  const [account, deviceId, ...rest] = signer.unseal(DEVICE_TOKEN, token)?.split(' ') ?? [];
  return account === userId && deviceId && rest.length === 0 ? deviceId : undefined;
}
