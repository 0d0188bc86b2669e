// Starts Swagger UI (/docs) or ReDoc (/redoc) on the portal's own OpenAPI description.
(function () {
  "use strict";
  var root = document.getElementById("api-reference");
  var url = root.getAttribute("data-openapi-url");
  if (root.getAttribute("data-viewer") === "swagger") {
    window.SwaggerUIBundle({
      url: url,
      domNode: root,
      // Without deep links an operation's summary is one button, not a button around a
      // link (nested interactive controls confuse screen readers and keyboards).
      deepLinking: false,
      // Unsafe calls need the session's CSRF token, which the portal's pages carry; from
      // here, "Try it out" works for GET and for bearer tokens (Authorize).
      presets: [window.SwaggerUIBundle.presets.apis],
      layout: "BaseLayout"
    });
  } else {
    // ReDoc's default colours fall below WCAG AA contrast in places (red code on grey,
    // grey headings, red and green tabs on the dark panel); these keep its look, darker
    // or lighter where needed.
    window.Redoc.init(url, {
      theme: {
        colors: {
          text: { secondary: "#5d6780" },
          responses: {
            success: { tabTextColor: "#7ee2a8" },
            error: { tabTextColor: "#ff9c94" },
            redirect: { tabTextColor: "#ffc46b" },
            info: { tabTextColor: "#9ecbff" }
          }
        },
        typography: { code: { color: "#a3201d" } }
      }
    }, root);
  }
})();
