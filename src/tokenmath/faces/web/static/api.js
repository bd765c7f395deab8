// The page's one way to the server: GET /api/<endpoint> with the inputs as a query string; errors as ApiError.
import { $ } from "./dom.js";

const main = () => $("#main");
// ---- API ---------------------------------------------------------------------------------------------------------
let pending = 0;
export function busy(d) {
  pending += d;
  main().dataset.pending = String(pending);
  $("#status").textContent = pending > 0 ? "computing\u2026" : "";
}

export class ApiError extends Error {
  constructor(err, status) {
    super(err ? `${err.field || "request"}: ${err.problem}` : `HTTP ${status}`);
    this.err = err || {};
    this.status = status;
  }
}

export async function api(endpoint, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === "" || v === null || v === undefined || v === false) continue;
    q.set(k, v === true ? "1" : String(v).trim());
  }
  busy(+1);
  try {
    const r = await fetch(`/api/${endpoint}?${q}`, { headers: { Accept: "application/json" } });
    let body = null;
    try { body = await r.json(); } catch (e) { body = null; }
    if (!r.ok) throw new ApiError(body && body.error, r.status);
    return body;
  } finally {
    busy(-1);
  }
}
