// The REST API, called with the API key the person signed in with (a Bearer header; no cookies).

const STORE = "threadline.console";

export class ApiError extends Error {
  constructor(status, error, detail) {
    super(detail);
    this.status = status;
    this.error = error;
    this.detail = detail;
  }
}

export const session = {
  get key() {
    return this.load()?.key || null;
  },
  get me() {
    return this.load()?.me || null;
  },
  get isAdmin() {
    return this.me?.role === "admin";
  },
  load() {
    try {
      return JSON.parse(sessionStorage.getItem(STORE) || "null");
    } catch {
      return null;
    }
  },
  save(key, me) {
    sessionStorage.setItem(STORE, JSON.stringify({ key, me }));
  },
  clear(reason) {
    const had = sessionStorage.getItem(STORE) !== null;
    sessionStorage.removeItem(STORE);
    if (had) window.dispatchEvent(new CustomEvent("console:signed-out", { detail: reason || "" }));
  },
};

function headers(key, extra = {}) {
  return { Authorization: `Bearer ${key}`, ...extra };
}

async function failure(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  if (body && typeof body.error === "string") return new ApiError(response.status, body.error, body.detail || "");
  return new ApiError(response.status, `HTTP ${response.status}`, response.statusText || "The server answered with an error.");
}

// One request; `key` defaults to the signed-in one. A 401 with the session's key signs the console out.
export async function request(method, path, body, { key, signal, accept } = {}) {
  const useKey = key || session.key;
  const init = { method, headers: headers(useKey, accept ? { Accept: accept } : {}), signal };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError(0, "NetworkError", "The server could not be reached. Check that Threadline is running, then try again.");
  }
  if (response.status === 401 && !key) {
    session.clear("Your API key is no longer accepted (it may have been revoked). Sign in with a valid key.");
  }
  if (!response.ok) throw await failure(response);
  return response;
}

export async function api(method, path, body, options) {
  const response = await request(method, path, body, options);
  if (response.status === 204) return null;
  return response.json();
}

export const get = (path, options) => api("GET", path, undefined, options);
export const post = (path, body = {}, options) => api("POST", path, body, options);
export const patch = (path, body, options) => api("PATCH", path, body, options);
export const del = (path, options) => api("DELETE", path, undefined, options);

// Every page of a list (the API pages at 100 at most); `max` bounds how many are fetched.
export async function all(path, { max = 500, signal } = {}) {
  const items = [];
  let cursor = null;
  do {
    const sep = path.includes("?") ? "&" : "?";
    const page = await get(`${path}${sep}limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`, { signal });
    items.push(...page.data);
    cursor = page.next_cursor;
  } while (cursor && items.length < max);
  return items;
}

// Server-Sent Events over fetch: EventSource cannot send the Authorization header.
// Calls onEvent(frame) for each event's JSON data; resolves when the stream ends.
export async function followEvents(path, onEvent, { signal, after = 0 } = {}) {
  const response = await request("GET", after ? `${path}?after=${after}` : path, undefined, { signal, accept: "text/event-stream" });
  await readEvents(response, onEvent);
}

export async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = frame.split("\n").filter((line) => line.startsWith("data:")).map((line) => line.slice(5).trimStart()).join("\n");
      if (data) {
        try {
          onEvent(JSON.parse(data));
        } catch (error) {
          console.error("unreadable event", error);
        }
      }
    }
  }
}
