import type { Express, RequestHandler } from 'express';
import { problemCatalogue, problemPage, ProblemCodeSchema, type ProblemPage } from '@task-service/client';

// /problems and /problems/{code} for a browser (docs/api-guide.md, errors): the same catalogue as the JSON the
// contract declares, as a page. Served before the contract's routes when the client prefers HTML.

const CONTENT_SECURITY_POLICY =
  "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; frame-ancestors 'none'";

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);

/** The catalogue's prose, escaped, with its `inline code` shown as code. */
const prose = (text: string) => escapeHtml(text).replace(/`([^`]+)`/g, '<code>$1</code>');

const STYLE =
  'body{font:16px/1.5 system-ui,sans-serif;max-width:44rem;margin:2rem auto;padding:0 1rem;color:#1b1b1b}code{background:#f2f2f2;padding:0 .25em;border-radius:3px}dt{font-weight:600;margin-top:1rem}';

const page = (title: string, body: string) => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · Task service problems</title>
<style>${STYLE}</style>
</head>
<body>
${body}
</body>
</html>
`;

function problemHtml(problem: ProblemPage): string {
  return page(
    `${escapeHtml(problem.title)} (${problem.code})`,
    `<p><a href="/problems">Every problem</a> · <a href="/docs">API reference</a></p>
<h1>${escapeHtml(problem.title)}</h1>
<p><code>${problem.code}</code> · HTTP ${problem.status}</p>
<h2>What it means</h2>
<p>${prose(problem.meaning)}</p>
<h2>What to do</h2>
<p>${prose(problem.action)}</p>`,
  );
}

function catalogueHtml(): string {
  const entries = ProblemCodeSchema.options.map((code) => {
    const entry = problemCatalogue[code];
    return `<dt><a href="/problems/${code}">${code}</a> · HTTP ${entry.status}</dt>\n<dd>${prose(entry.meaning)}</dd>`;
  });
  return page(
    'Every problem',
    `<p><a href="/docs">API reference</a></p>\n<h1>Problems</h1>\n<p>Every error answer is an RFC 9457 problem whose <code>type</code> is one of these pages.</p>\n<dl>\n${entries.join('\n')}\n</dl>`,
  );
}

/** Answers HTML when the client prefers it to JSON; otherwise the contract's JSON route answers. */
const inHtml =
  (render: (code: string | undefined) => string | undefined): RequestHandler =>
  (req, res, next) => {
    res.vary('Accept');
    if (req.accepts(['application/json', 'text/html']) !== 'text/html') return next();
    const html = render(typeof req.params.code === 'string' ? req.params.code : undefined);
    if (html === undefined) return next(); // an unknown code: the contract's 404 problem
    res.setHeader('Content-Security-Policy', CONTENT_SECURITY_POLICY);
    res.type('html').send(html);
  };

export function serveProblemPages(app: Express): void {
  app.get(
    '/problems',
    inHtml(() => catalogueHtml()),
  );
  app.get(
    '/problems/:code',
    inHtml((code) => {
      const problem = code === undefined ? undefined : problemPage(code);
      return problem && problemHtml(problem);
    }),
  );
}
