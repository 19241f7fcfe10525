import type { Express, RequestHandler } from 'express';
import { initServer } from '@ts-rest/express';
import { ProblemCodeSchema } from '@task-service/client';
import { docsContract } from '@task-service/client';
import { problemCatalogue, problemPage } from '@task-service/client';
import { AppError } from '../http/errors.js';
import { openApiDocument } from './document.js';
import { loadDocsAssets, preferredEncoding } from './assets.js';
import { referencePage } from './reference-page.js';

const ONE_YEAR_SECONDS = 365 * 24 * 3600;
const docsAssets = loadDocsAssets();
const ASSETS_PATH = `/docs/assets/${docsAssets.version}`;

const CONTENT_SECURITY_POLICY = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

export function docsRouter() {
  const document = openApiDocument();
  return initServer().router(docsContract, {
    openapi: async () => ({ status: 200, body: document }),
    problems: async () => ({ status: 200, body: { items: ProblemCodeSchema.options.map((code) => ({ code, ...problemCatalogue[code] })) } }),
    problem: async ({ params }) => {
      const page = problemPage(params.code);
      if (!page) throw new AppError('not_found', `No problem code ${params.code}`);
      return { status: 200, body: page };
    },
    reference: async ({ res }) => {
      res.setHeader('Content-Security-Policy', CONTENT_SECURITY_POLICY);
      return { status: 200, body: referencePage(ASSETS_PATH) };
    },
  });
}

/** An asset of the current version, compressed as the client accepts, cacheable for a year. */
const serveAsset: RequestHandler = (req, res, next) => {
  const asset = req.params.version === docsAssets.version && typeof req.params.asset === 'string' ? docsAssets.assets.get(req.params.asset) : undefined;
  if (!asset) return next(new AppError('not_found', `No such asset: ${req.path}`));
  const encoding = preferredEncoding(req.headers['accept-encoding']);
  res.setHeader('Cache-Control', `public, max-age=${ONE_YEAR_SECONDS}, immutable`);
  res.setHeader('Vary', 'Accept-Encoding');
  res.setHeader('Content-Type', asset.type);
  if (encoding !== 'identity' && asset[encoding] !== asset.identity) res.setHeader('Content-Encoding', encoding);
  res.send(asset[encoding]);
};

/** The reference page's scripts and styles, served locally under /docs/assets/<version>/. */
export function serveDocsAssets(app: Express): void {
  app.get('/docs/assets/:version/:asset', serveAsset);
}
