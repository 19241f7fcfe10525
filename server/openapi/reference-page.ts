// The API reference at /docs: Swagger UI over /openapi.json. The script is a file of its own so
// the page runs under a Content-Security-Policy without inline scripts.

/** The page, its assets under `assets` (a path naming their version). */
export const referencePage = (assets: string) => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Task service API reference</title>
<link rel="stylesheet" href="${assets}/swagger-ui.css">
<link rel="icon" type="image/png" href="${assets}/favicon-32x32.png">
</head>
<body>
<noscript>The reference needs JavaScript; the document itself is at <a href="/openapi.json">/openapi.json</a>, the error codes at <a href="/problems">/problems</a>.</noscript>
<div id="swagger-ui"></div>
<script src="${assets}/swagger-ui-bundle.js"></script>
<script src="${assets}/reference.js"></script>
</body>
</html>
`;

export const REFERENCE_SCRIPT = `window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#swagger-ui', deepLinking: true, persistAuthorization: false, showExtensions: true });
});
`;
