// The sign-in, consent and error pages of the authorization endpoint: server-rendered HTML, no
// script, no asset from anywhere (the style is inline under a per-answer nonce), labelled fields in
// keyboard order, and a Content-Security-Policy that forbids framing (clickjacking a consent).
import { randomBytes } from 'node:crypto';
import type { Response } from 'express';
import { scopeDescriptions, type Scope } from '@task-service/client';

export const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);

// The colours and type of the docs page (GET /docs).
const STYLE = `
*{box-sizing:border-box}
body{margin:0;font:16px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;color:#3b4151;background:#fafafa}
header{background:#1b1b1b;color:#fff;padding:.75rem 1rem}
header p{margin:0;max-width:34rem;margin:0 auto;font-weight:600}
main{max-width:34rem;margin:2rem auto;padding:1.5rem;background:#fff;border:1px solid #d8dde7;border-radius:4px}
h1{font-size:1.5rem;margin:0 0 1rem;color:#3b4151}
label{display:block;font-weight:600;margin:1rem 0 .25rem}
input[type=email],input[type=password]{width:100%;padding:.5rem;font:inherit;border:1px solid #8c8c8c;border-radius:4px}
button{font:inherit;font-weight:600;padding:.5rem 1.25rem;margin:1.25rem .5rem 0 0;border-radius:4px;border:2px solid #49cc90;background:#49cc90;color:#1b1b1b;cursor:pointer}
button.secondary{background:#fff;border-color:#8c8c8c}
:focus-visible{outline:3px solid #61affe;outline-offset:2px}
ul{padding-left:1.25rem}li{margin:.25rem 0}
code{background:#f2f2f2;padding:0 .25em;border-radius:3px}
.alert{border-left:4px solid #f93e3e;background:#fff5f5;padding:.5rem .75rem}
.note{font-size:.9rem;color:#5c6370}
`;

export interface PageOptions {
  title: string;
  body: string;
  status?: number;
  /** Where the page's form may send the browser, the redirect URI's origin included (Chromium checks form-action on the redirect). */
  formTargets?: string[];
}

/** Sends a page with its security headers; the nonce admits only this page's own style. */
export function sendPage(res: Response, { title, body, status = 200, formTargets }: PageOptions): void {
  const nonce = randomBytes(16).toString('base64');
  const formAction = formTargets ? ["'self'", ...formTargets].join(' ') : "'none'";
  res.status(status);
  res.setHeader(
    'Content-Security-Policy',
    `default-src 'none'; style-src 'nonce-${nonce}'; img-src 'self'; form-action ${formAction}; frame-ancestors 'none'; base-uri 'none'`,
  );
  res.setHeader('X-Frame-Options', 'DENY');
  res.setHeader('Referrer-Policy', 'no-referrer');
  res.type('html').send(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)} · Task service</title>
<style nonce="${nonce}">${STYLE}</style>
</head>
<body>
<header><p>Task service</p></header>
<main>
${body}
</main>
</body>
</html>
`);
}

/** The hidden fields that carry the authorization request from one step to the next. */
export const hiddenFields = (fields: Record<string, string | undefined>): string =>
  Object.entries(fields)
    .filter((entry): entry is [string, string] => entry[1] !== undefined)
    .map(([name, value]) => `<input type="hidden" name="${escapeHtml(name)}" value="${escapeHtml(value)}">`)
    .join('\n');

const alert = (message: string | undefined) =>
  message === undefined ? '' : `<p class="alert" role="alert" id="form-error">${escapeHtml(message)}</p>`;

export function signInBody(appName: string, hidden: string, error: string | undefined, email = ''): string {
  const described = error === undefined ? '' : ' aria-describedby="form-error"';
  return `<h1>Sign in to connect ${escapeHtml(appName)}</h1>
<p>An app calling itself <strong>${escapeHtml(appName)}</strong> asks to use your task service account. Sign in to see what it asks for; nothing is shared before you allow it.</p>
${alert(error)}
<form method="post" action="authorize">
${hidden}
<input type="hidden" name="step" value="sign_in">
<label for="email">Email</label>
<input id="email" name="email" type="email" autocomplete="username" required maxlength="254" value="${escapeHtml(email)}"${described}>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required maxlength="128"${described}>
<button type="submit">Sign in</button>
</form>`;
}

export interface ConsentView {
  appName: string;
  user: { name: string; email: string };
  scopes: Scope[];
  /** Administrator powers were asked for by an account that has none: left out of the grant. */
  adminDropped: boolean;
  mcpOnly: boolean;
  redirectHost: string;
}

export function consentBody(view: ConsentView, hidden: string): string {
  const scopes = view.scopes
    .map((scope) => `<li><code>${scope}</code>: ${escapeHtml(scopeDescriptions[scope])}</li>`)
    .join('\n');
  return `<h1>Allow ${escapeHtml(view.appName)} to use your account?</h1>
<p>Signed in as <strong>${escapeHtml(view.user.name)}</strong> (${escapeHtml(view.user.email)}).</p>
<p><strong>${escapeHtml(view.appName)}</strong> will be able to:</p>
<ul id="scopes">
${scopes}
</ul>
${view.adminDropped ? '<p class="note">It also asked for administrator powers, which your account does not have: they are left out.</p>' : ''}
<p>${view.mcpOnly ? 'Only through the MCP endpoint (<code>/mcp</code>), as an AI assistant’s tools.' : 'Through the whole API.'}</p>
<p>After you decide, your browser goes back to <strong>${escapeHtml(view.redirectHost)}</strong>. The app’s name is its own claim: allow it only if you started this from an app you trust. You can disconnect it at any time (<code>DELETE /oauth/grants/{id}</code>).</p>
<form method="post" action="authorize">
${hidden}
<button type="submit" name="step" value="approve">Allow</button>
<button type="submit" name="step" value="deny" class="secondary">Deny</button>
</form>`;
}

export const errorBody = (heading: string, detail: string): string =>
  `<h1>${escapeHtml(heading)}</h1>
<p role="alert">${escapeHtml(detail)}</p>
<p>Nothing was shared. Go back to the app and connect again.</p>`;
