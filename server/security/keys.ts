import { hkdf } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import path from 'node:path';
// jose's entry point loads all of it (JWE, JWKS, ...); its subpaths load what is used.
import type { CryptoKey, JWK, KeyObject } from 'jose';
import { calculateJwkThumbprint } from 'jose/jwk/thumbprint';
import { exportJWK, exportPKCS8 } from 'jose/key/export';
import { generateKeyPair } from 'jose/key/generate/keypair';
import { importJWK, importPKCS8 } from 'jose/key/import';
import { OperatorError } from '../operator-error.js';
import type { SqlSession } from '../db/sql.js';
import { tables } from '../db/query.js';

export const SIGNING_ALGORITHM = 'EdDSA';
/** The name of the generated key's row in signing_keys. */
const GENERATED_KEY = 'generated';
const STORED_KEY = 'The generated signing key in the signing_keys table';

export interface SigningKey {
  kid: string;
  privateKey: KeyObject | CryptoKey;
  publicKey: KeyObject | CryptoKey;
  publicJwk: JWK;
}

async function fromPrivatePem(pem: string, source: string): Promise<SigningKey> {
  const privateKey = await importPKCS8(pem, SIGNING_ALGORITHM, { extractable: true }).catch(() => {
    throw new OperatorError(
      `${source} is not an Ed25519 private key in PKCS#8 PEM: make one with \`openssl genpkey -algorithm ed25519\``,
    );
  });
  const privateJwk = await exportJWK(privateKey);
  // The public half of an OKP key is its `x` member.
  const publicJwk: JWK = { kty: privateJwk.kty, crv: privateJwk.crv, x: privateJwk.x };
  const kid = await calculateJwkThumbprint(publicJwk);
  const publicKey = await importJWK(publicJwk, SIGNING_ALGORITHM);
  if (publicKey instanceof Uint8Array) throw new Error('unexpected symmetric key');
  return { kid, privateKey, publicKey, publicJwk: { ...publicJwk, kid, alg: SIGNING_ALGORITHM, use: 'sig' } };
}

/** Checks JWT_PRIVATE_KEY before anything else starts (the database among them): one line if it is not a key. */
export async function checkConfiguredKey(configuredPem: string | undefined): Promise<void> {
  if (configuredPem) await fromPrivatePem(configuredPem, 'JWT_PRIVATE_KEY');
}

/** The key earlier versions generated into DATA_DIR/keys, adopted so their tokens stay valid. */
async function keyFileOf(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    if (error instanceof Error && 'code' in error && error.code === 'ENOENT') return undefined;
    throw error;
  }
}

async function newPrivatePem(): Promise<string> {
  const { privateKey } = await generateKeyPair(SIGNING_ALGORITHM, { crv: 'Ed25519', extractable: true });
  return exportPKCS8(privateKey);
}

/**
 * The token signing key: from configuration (a PKCS#8 PEM Ed25519 key) when given, else generated
 * once and kept in the database, so that every instance on it signs with the same key and tokens
 * survive a restart.
 */
export async function loadSigningKey(
  configuredPem: string | undefined,
  sql: SqlSession,
  dataDir: string,
): Promise<SigningKey> {
  if (configuredPem) return fromPrivatePem(configuredPem, 'JWT_PRIVATE_KEY');
  const storedPem = async () =>
    (await sql.first(tables.selectFrom('signing_keys').select('private_key_pem').where('name', '=', GENERATED_KEY)))
      ?.private_key_pem;
  const stored = await storedPem();
  if (stored) return fromPrivatePem(stored, STORED_KEY);
  const file = path.join(dataDir, 'keys', 'jwt-ed25519.pem');
  const fromFile = await keyFileOf(file);
  if (fromFile) await fromPrivatePem(fromFile, file); // a broken file is named before it is adopted
  const candidate = fromFile ?? (await newPrivatePem());
  // Of instances starting together on a new database, the first insert wins and all use its key.
  await sql.write(
    tables
      .insertInto('signing_keys')
      .values({ name: GENERATED_KEY, private_key_pem: candidate })
      .onConflict((conflict) => conflict.column('name').doNothing()),
  );
  const chosen = await storedPem();
  if (!chosen) throw new Error('the generated signing key is missing right after its insert');
  return fromPrivatePem(chosen, STORED_KEY);
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
