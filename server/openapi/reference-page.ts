// The API reference at /docs: Swagger UI over /openapi.json. The script is a file of its own so
// the page runs under a Content-Security-Policy without inline scripts.

export const REFERENCE_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Task service API reference</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
<link rel="icon" type="image/png" href="/docs/assets/favicon-32x32.png">
</head>
<body>
<noscript>The reference needs JavaScript; the document itself is at <a href="/openapi.json">/openapi.json</a>.</noscript>
<div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/assets/reference.js"></script>
</body>
</html>
`;

export const REFERENCE_SCRIPT = `window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#swagger-ui', deepLinking: true, persistAuthorization: false });
});
`;
