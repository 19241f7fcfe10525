import { hkdf } from 'node:crypto';
import { promisify } from 'node:util';
import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { calculateJwkThumbprint, exportJWK, exportPKCS8, generateKeyPair, importJWK, importPKCS8, type CryptoKey, type JWK, type KeyObject } from 'jose';
import { OperatorError } from '../operator-error.js';

export const SIGNING_ALGORITHM = 'EdDSA';

export interface SigningKey {
  kid: string;
  privateKey: KeyObject | CryptoKey;
  publicKey: KeyObject | CryptoKey;
  publicJwk: JWK;
}

async function fromPrivatePem(pem: string, source: string): Promise<SigningKey> {
  const privateKey = await importPKCS8(pem, SIGNING_ALGORITHM, { extractable: true }).catch(() => {
    throw new OperatorError(`${source} is not an Ed25519 private key in PKCS#8 PEM: make one with \`openssl genpkey -algorithm ed25519\``);
  });
  const privateJwk = await exportJWK(privateKey);
  // The public half of an OKP key is its `x` member.
  const publicJwk: JWK = { kty: privateJwk.kty, crv: privateJwk.crv, x: privateJwk.x };
  const kid = await calculateJwkThumbprint(publicJwk);
  const publicKey = await importJWK(publicJwk, SIGNING_ALGORITHM);
  if (publicKey instanceof Uint8Array) throw new Error('unexpected symmetric key');
  return { kid, privateKey, publicKey, publicJwk: { ...publicJwk, kid, alg: SIGNING_ALGORITHM, use: 'sig' } };
}

/**
 * The token signing key: from configuration (a PKCS#8 PEM Ed25519 key) when given, else generated
 * once and kept in DATA_DIR/keys so tokens survive a restart.
 */
export async function loadSigningKey(configuredPem: string | undefined, dataDir: string): Promise<SigningKey> {
  if (configuredPem) return fromPrivatePem(configuredPem, 'JWT_PRIVATE_KEY');
  const file = path.join(dataDir, 'keys', 'jwt-ed25519.pem');
  try {
    return await fromPrivatePem(await readFile(file, 'utf8'), file);
  } catch (error) {
    if (!(error instanceof Error && 'code' in error && error.code === 'ENOENT')) throw error;
  }
  const { privateKey } = await generateKeyPair(SIGNING_ALGORITHM, { crv: 'Ed25519', extractable: true });
  const pem = await exportPKCS8(privateKey);
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, pem, { mode: 0o600 });
  await chmod(tmp, 0o600);
  await rename(tmp, file);
  return fromPrivatePem(pem, file);
}

/**
 * A secret for another purpose (e.g. signing list cursors), derived from the private key with HKDF,
 * so every instance configured with the same key derives the same secret and nothing else is shared.
 */
export async function derivedSecret(key: SigningKey, purpose: string): Promise<Uint8Array> {
  const { d } = await exportJWK(key.privateKey);
  if (!d) throw new Error('the signing key has no private part');
  const bytes = await promisify(hkdf)('sha256', Buffer.from(d, 'base64url'), 'task-service', purpose, 32);
  return new Uint8Array(bytes);
}
