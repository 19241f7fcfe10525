// The reference page's files, each compressed once per coding a client asks for (brotli, gzip), and
// served under a path that names their content, so browsers may keep them for a year: a new Swagger
// UI or script is a new path.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';
import { REFERENCE_SCRIPT, REFERENCE_STYLES } from './reference-page.js';

export type Coding = 'br' | 'gzip' | 'identity';

export interface Asset {
  type: string;
  /** The bytes as they are. */
  identity: Buffer;
  /** The bytes in `coding` (`identity` itself when compressing would not shrink them). */
  encoded(coding: Coding): Buffer;
}

// Swagger UI's files come from the installed package: the page needs no network beyond the service.
const swaggerUiDir = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));

const SOURCES: Record<string, { type: string; read: () => Buffer }> = {
  'swagger-ui.css': {
    type: 'text/css; charset=utf-8',
    read: () => readFileSync(path.join(swaggerUiDir, 'swagger-ui.css')),
  },
  'swagger-ui-bundle.js': {
    type: 'text/javascript; charset=utf-8',
    read: () => readFileSync(path.join(swaggerUiDir, 'swagger-ui-bundle.js')),
  },
  'favicon-32x32.png': { type: 'image/png', read: () => readFileSync(path.join(swaggerUiDir, 'favicon-32x32.png')) },
  'reference.js': { type: 'text/javascript; charset=utf-8', read: () => Buffer.from(REFERENCE_SCRIPT) },
  'reference.css': { type: 'text/css; charset=utf-8', read: () => Buffer.from(REFERENCE_STYLES) },
};

const compress: Record<Exclude<Coding, 'identity'>, (bytes: Buffer) => Buffer> = {
  br: (bytes) =>
    brotliCompressSync(bytes, {
      params: { [constants.BROTLI_PARAM_QUALITY]: 9, [constants.BROTLI_PARAM_SIZE_HINT]: bytes.length },
    }),
  gzip: (bytes) => gzipSync(bytes, { level: 9 }),
};

// Compressed at the first request that accepts the coding: a browser asks for brotli only, and
// brotli and gzip of Swagger UI's bundle take about a CPU second together.
function compressed(type: string, identity: Buffer): Asset {
  // A PNG is compressed already; text shrinks to about a quarter.
  if (type.startsWith('image/')) return { type, identity, encoded: () => identity };
  const made = new Map<Exclude<Coding, 'identity'>, Buffer>();
  return {
    type,
    identity,
    encoded(coding) {
      if (coding === 'identity') return identity;
      let bytes = made.get(coding);
      if (!bytes) {
        bytes = compress[coding](identity);
        made.set(coding, bytes);
      }
      return bytes;
    },
  };
}

/** Every asset by name, compressed, and the version segment of their path (a hash of their content). */
export function loadDocsAssets(): { version: string; assets: Map<string, Asset> } {
  const assets = new Map<string, Asset>();
  const hash = createHash('sha256');
  for (const [name, { type, read }] of Object.entries(SOURCES)) {
    const identity = read();
    hash.update(name).update(identity);
    assets.set(name, compressed(type, identity));
  }
  return { version: hash.digest('hex').slice(0, 12), assets };
}

/** The coding to send for an Accept-Encoding header: brotli, else gzip, else none. */
export function preferredEncoding(acceptEncoding: string | undefined): Coding {
  const accepted = new Map(
    (acceptEncoding ?? '').split(',').map((part) => {
      const [coding = '', ...params] = part.trim().toLowerCase().split(';');
      const q = params.map((param) => /^\s*q=([\d.]+)\s*$/.exec(param)?.[1]).find((value) => value !== undefined);
      return [coding.trim(), q === undefined ? 1 : Number(q)] as const;
    }),
  );
  const allowed = (coding: string) => (accepted.get(coding) ?? accepted.get('*') ?? 0) > 0;
  if (allowed('br')) return 'br';
  if (allowed('gzip')) return 'gzip';
  return 'identity';
}
