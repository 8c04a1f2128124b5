// The console's only way to the server: openqna's own HTTP APIs, with the key the user signed in with.
// Azure's authoring routes (projects, QnAs, deployments, import/export, synonyms), its runtime
// (:query-knowledgebases) and openqna's /openqna routes (whoami, keys, uploads, diffs, Inspect).

const KEY = "openqna.key";
export const API_VERSION = "2023-04-01";
export const AUTHORING = "/language/authoring/query-knowledgebases/projects";

export function savedKey() { return sessionStorage.getItem(KEY) || ""; }
export function saveKey(key) { key ? sessionStorage.setItem(KEY, key) : sessionStorage.removeItem(KEY); }

export class ApiError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

function withVersion(path) {
  if (!path.startsWith("/language/") || path.includes("api-version=")) return path;
  return path + (path.includes("?") ? "&" : "?") + "api-version=" + API_VERSION;
}

// One request; answers the parsed JSON (or null), throws ApiError with the server's own message.
export async function call(method, path, body, { raw = false, headers = {} } = {}) {
  const init = { method, headers: { ...headers } };
  const key = savedKey();
  if (key) init.headers["Ocp-Apim-Subscription-Key"] = key;
  if (body !== undefined) {
    if (raw) init.body = body;
    else { init.body = JSON.stringify(body); init.headers["Content-Type"] = "application/json"; }
  }
  const response = await fetch(withVersion(path), init);
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = text; }
  if (!response.ok) {
    const error = data && data.error ? data.error : {};
    throw new ApiError(response.status, error.code || String(response.status),
                       error.message || `${method} ${path} failed with ${response.status}.`);
  }
  return { data, response };
}

export async function get(path) { return (await call("GET", path)).data; }

// Every page of an Azure collection (they page with nextLink).
export async function all(path) {
  let url = withVersion(path + (path.includes("?") ? "&" : "?") + "maxpagesize=1000");
  const items = [];
  while (url) {
    const next = new URL(url, location.origin); // nextLink is absolute (OPENQNA_PUBLIC_URL behind a proxy)
    const { data } = await call("GET", next.pathname + next.search);
    items.push(...data.value);
    url = data.nextLink || null;
  }
  return items;
}

// Send a long operation (202 + Operation-Location) and poll it until it ends; onStatus sees each state.
export async function operation(method, path, body, { raw = false, onStatus = () => {} } = {}) {
  const { response } = await call(method, path, body, { raw });
  const where = response.headers.get("Operation-Location");
  if (!where) return null;
  const url = new URL(where, location.origin);
  for (;;) {
    const job = (await call("GET", url.pathname + url.search)).data;
    onStatus(job.status, job);
    if (job.status === "succeeded") return job;
    if (job.status === "failed") {
      const e = (job.errors || [])[0] || {};
      throw new ApiError(409, e.code || "Failed", e.message || "The operation failed.");
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

export const project = (name) => `${AUTHORING}/${encodeURIComponent(name)}`;
