import { createRequire } from 'node:module';
import path from 'node:path';
import type { Express, RequestHandler } from 'express';
import { initServer } from '@ts-rest/express';
import { docsContract } from '../../contract/docs.js';
import { AppError } from '../http/errors.js';
import { openApiDocument } from './document.js';
import { REFERENCE_PAGE, REFERENCE_SCRIPT } from './reference-page.js';

// Swagger UI's files come from the installed package: the page needs no network beyond the service.
const swaggerUiDir = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
const SWAGGER_UI_FILES = new Set(['swagger-ui.css', 'swagger-ui-bundle.js', 'favicon-32x32.png']);
const ASSET_MAX_AGE_SECONDS = 24 * 3600;

const CONTENT_SECURITY_POLICY = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

export function docsRouter() {
  const document = openApiDocument();
  return initServer().router(docsContract, {
    openapi: async () => ({ status: 200, body: document }),
    reference: async ({ res }) => {
      res.setHeader('Content-Security-Policy', CONTENT_SECURITY_POLICY);
      return { status: 200, body: REFERENCE_PAGE };
    },
  });
}

const serveAsset: RequestHandler = (req, res, next) => {
  const asset = typeof req.params.asset === 'string' ? req.params.asset : '';
  if (asset === 'reference.js') {
    res.setHeader('Cache-Control', `public, max-age=${ASSET_MAX_AGE_SECONDS}`);
    res.type('text/javascript').send(REFERENCE_SCRIPT);
  } else if (SWAGGER_UI_FILES.has(asset)) {
    res.sendFile(asset, { root: swaggerUiDir, maxAge: ASSET_MAX_AGE_SECONDS * 1000 }, (err) => err && next(err));
  } else {
    next(new AppError('not_found', `No such asset: ${asset}`));
  }
};

/** The reference page's scripts and styles, served locally under /docs/assets/. */
export function serveDocsAssets(app: Express): void {
  app.get('/docs/assets/:asset', serveAsset);
}
