"""`tokenmath serve`: a local, offline web page over the analyses (standard library only).

- api.py: the JSON API (class Api): parses a request's parameters, calls its endpoint, caches the JSON bytes, keeps
  the uploaded models. No physics here.
- endpoints.py: each endpoint's parameters and response: the analysis' `to_dict()` plus its `explain` text (the same
  as `--explain`) and, where a chart needs arrays the dict leaves out, a small `chart` object (charts.py).
- params.py: Param and the coercion of query-string or JSON values; payload.py: JSON bytes (NaN/inf to null);
  catalogs.py: GET /api/models and /api/hardware; uploads.py: uploaded config.json files.
- server.py: the server (socket, Api, static files); connections.py: the connection loop (deadlines, a connection
  cap, a fixed pool of worker threads); handler.py: one request (http.server parsing): routing, cross-site checks,
  size limits, error bodies.
- static/: the page (index.html, app.js, app.css): vanilla JS drawing its own SVG charts; no CDN, no build step.
"""
from tokenmath.faces.web.server import make_server, serve  # noqa: F401
