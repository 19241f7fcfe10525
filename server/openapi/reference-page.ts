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
<link rel="stylesheet" href="${assets}/reference.css">
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

// An operation's answers are many (its own, and the errors every operation may give): each one's
// headers, and the example of each error answer, are folded under a line that opens them, so an
// expanded operation reads in a screen or two rather than ten.
export const REFERENCE_SCRIPT = `window.addEventListener('load', function () {
  function folded(system, summary, Original, props, kind) {
    var h = system.React.createElement;
    return h('details', { className: 'folded ' + (kind || '') }, h('summary', null, summary), h(Original, props));
  }
  function statusOf(props) {
    var path = props.specPath && props.specPath.toJS ? props.specPath.toJS() : [];
    var at = path.indexOf('responses');
    return at >= 0 ? Number(path[at + 1]) : 0;
  }
  function FoldedAnswers() {
    return {
      wrapComponents: {
        headers: function (Original, system) {
          return function (props) {
            var count = props.headers && props.headers.size ? props.headers.size : 0;
            return count > 0 ? folded(system, 'Headers (' + count + ')', Original, props) : null;
          };
        },
        modelExample: function (Original, system) {
          return function (props) {
            return statusOf(props) >= 400
              ? folded(system, 'Example and schema', Original, props, 'folded-example')
              : system.React.createElement(Original, props);
          };
        },
      },
    };
  }
  window.ui = SwaggerUIBundle({
    url: '/openapi.json',
    dom_id: '#swagger-ui',
    deepLinking: true,
    persistAuthorization: false,
    // The extensions (x-scopes, x-codeSamples) are in each operation's description already.
    showExtensions: false,
    plugins: [FoldedAnswers],
  });
});
`;

/** Folded answers read as one line each: the summaries side by side, an error's media type and example
 * choice shown only with its example. */
export const REFERENCE_STYLES = `details.folded { margin: 4px 0; }
details.folded:not([open]) { display: inline-block; margin-right: 2em; }
details.folded > summary { cursor: pointer; font-size: 13px; color: #3b4151; }
.responses-table tr.response:has(details.folded-example:not([open])) .response-controls { display: none; }
`;
