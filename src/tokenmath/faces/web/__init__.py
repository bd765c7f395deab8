"""`tokenmath serve`: a local, offline web page over the analyses (standard library only).

- api.py: the JSON API. Each endpoint declares its parameters, coerces them (query string or JSON body) and calls one
  analysis; the response is that analysis' `to_dict()` plus its `explain` text (the same as `--explain`) and, where
  a chart needs arrays the dict leaves out, a small `chart` object. No physics here.
- server.py: http.server.ThreadingHTTPServer: routing, static files from web/static, size limits, error bodies.
- static/: the page (index.html, app.js, app.css): vanilla JS drawing its own SVG charts; no CDN, no build step.
"""
from tokenmath.faces.web.server import make_server, serve  # noqa: F401
