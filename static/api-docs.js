// Starts Swagger UI (/docs) or ReDoc (/redoc) on the portal's own OpenAPI description.
(function () {
  "use strict";
  var root = document.getElementById("api-reference");
  var url = root.getAttribute("data-openapi-url");
  if (root.getAttribute("data-viewer") === "swagger") {
    window.SwaggerUIBundle({
      url: url,
      domNode: root,
      deepLinking: true,
      // Unsafe calls need the session's CSRF token, which the portal's pages carry; from
      // here, "Try it out" works for GET and for bearer tokens (Authorize).
      presets: [window.SwaggerUIBundle.presets.apis],
      layout: "BaseLayout"
    });
  } else {
    window.Redoc.init(url, { disableSearch: false }, root);
  }
})();
