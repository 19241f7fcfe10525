import type { Express, Request, RequestHandler } from 'express';
import { initServer } from '@ts-rest/express';
import { ProblemCodeSchema } from '@task-service/client';
import { docsContract } from '@task-service/client';
import { problemCatalogue, problemPage } from '@task-service/client';
import { AppError } from '../http/errors.js';
import { loadDocsAssets, preferredEncoding } from './assets.js';
import { referencePage } from './reference-page.js';

const ONE_YEAR_SECONDS = 365 * 24 * 3600;
// Read and compressed at the first request for the page or its files: most processes never serve one.
let loadedAssets: ReturnType<typeof loadDocsAssets> | undefined;
const docsAssets = () => (loadedAssets ??= loadDocsAssets());

const CONTENT_SECURITY_POLICY =
  "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

// A scheme, a host name or an IP address, and a port: nothing a shell or JSON would read as more.
const ORIGIN = /^https?:\/\/(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;

/** The URL a request reached the service at (its Host, and its scheme as `trust proxy` allows), if well-formed. */
function originOf(req: Request): string | undefined {
  const origin = `${req.protocol}://${req.get('host') ?? ''}`;
  return ORIGIN.test(origin) ? origin : undefined;
}

export function docsRouter() {
  return initServer().router(docsContract, {
    // Generated at the first request (the generator and the examples are loaded only then).
    // The samples in it name the URL this request reached, so they work when copied.
    openapi: async ({ req }) => ({
      status: 200,
      body: (await import('./document.js')).openApiDocumentFor(originOf(req)),
    }),
    problems: async () => ({
      status: 200,
      body: { items: ProblemCodeSchema.options.map((code) => ({ code, ...problemCatalogue[code] })) },
    }),
    problem: async ({ params }) => {
      const page = problemPage(params.code);
      if (!page) throw new AppError('not_found', `No problem code ${params.code}`);
      return { status: 200, body: page };
    },
    reference: async ({ res }) => {
      res.setHeader('Content-Security-Policy', CONTENT_SECURITY_POLICY);
      return { status: 200, body: referencePage(`/docs/assets/${docsAssets().version}`) };
    },
  });
}

/** An asset of the current version, compressed as the client accepts, cacheable for a year. */
const serveAsset: RequestHandler = (req, res, next) => {
  const { version, assets } = docsAssets();
  const asset =
    req.params.version === version && typeof req.params.asset === 'string' ? assets.get(req.params.asset) : undefined;
  if (!asset) return next(new AppError('not_found', `No such asset: ${req.path}`));
  const encoding = preferredEncoding(req.headers['accept-encoding']);
  res.setHeader('Cache-Control', `public, max-age=${ONE_YEAR_SECONDS}, immutable`);
  res.setHeader('Vary', 'Accept-Encoding');
  res.setHeader('Content-Type', asset.type);
  const body = asset.encoded(encoding);
  if (body !== asset.identity) res.setHeader('Content-Encoding', encoding);
  res.send(body);
};

/** The reference page's scripts and styles, served locally under /docs/assets/<version>/. */
export function serveDocsAssets(app: Express): void {
  app.get('/docs/assets/:version/:asset', serveAsset);
}
