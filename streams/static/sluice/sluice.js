// sluice.js: follow one or several Sluice routes from a page.
//
// One route is one request to its path; several are one multiplexed request to
// /streams (docs/multiplexing.md). The client reads the stream with fetch, so it can
// send a token in a header and see statuses; it answers `challenge` events with a fresh
// token, reopens from the last id when a stream ends (a token's exp, a restart), backs
// off after network errors and 5xx, and stops on 401 and 403 with the server's reason.

const DEFAULT_RETRY_MS = 2000;
const CHALLENGE_TYPE = "application/x-challenge-response";
const CHALLENGE_ATTEMPTS = 10; // a 503 with retry-after (the answer has not reached every server yet) is sent again

// -- the event stream format (pure) ----------------------------------------------------

/**
 * An incremental parser of text/event-stream, as browsers parse it.
 * `push(text)` returns the blocks completed by `text`: events as {type, data, id, retry}
 * (`id` is the last event id in effect after the block), and id-only blocks as
 * {type: null, data: null, id} so a client can keep its last id.
 * @returns {{push(text: string): Array<{type: string|null, data: string|null, id: string, retry: number|null}>, lastEventId: string}}
 */
export function parseEventStream() {
  let buffer = "";
  let first = true;
  let data = [];
  let type = "";
  let sawId = false;
  let retry = null;
  const parser = { lastEventId: "", push };

  function line(text, out) {
    if (text === "") {
      if (data.length) {
        out.push({ type: type || "message", data: data.join("\n"), id: parser.lastEventId, retry });
      } else if (sawId || retry !== null) {
        out.push({ type: null, data: null, id: parser.lastEventId, retry });
      }
      data = []; type = ""; sawId = false; retry = null;
      return;
    }
    if (text.startsWith(":")) return;
    const colon = text.indexOf(":");
    const name = colon < 0 ? text : text.slice(0, colon);
    let value = colon < 0 ? "" : text.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (name === "data") data.push(value);
    else if (name === "event") type = value;
    else if (name === "id") { if (!value.includes("\0")) { parser.lastEventId = value; sawId = true; } }
    else if (name === "retry") { if (/^\d+$/.test(value)) retry = Number(value); }
  }

  function push(text) {
    const out = [];
    buffer += text;
    if (first && buffer.length) {
      if (buffer.charCodeAt(0) === 0xfeff) buffer = buffer.slice(1);
      first = false;
    }
    let start = 0;
    for (let i = 0; i < buffer.length; i++) {
      const c = buffer[i];
      if (c !== "\n" && c !== "\r") continue;
      if (c === "\r" && i + 1 === buffer.length) break; // maybe the first half of CRLF: wait
      line(buffer.slice(start, i), out);
      if (c === "\r" && buffer[i + 1] === "\n") i++;
      start = i + 1;
    }
    buffer = buffer.slice(start);
    return out;
  }

  return parser;
}

/** A multiplexed event name as {member, type}: "scores" -> message of scores, "scores.delete" -> delete. */
export function memberOf(eventName) {
  if (eventName === "challenge" || eventName === "ended") return { member: null, type: eventName };
  const dot = eventName.indexOf(".");
  return dot < 0 ? { member: eventName, type: "message" } : { member: eventName.slice(0, dot), type: eventName.slice(dot + 1) };
}

// -- composite ids (pure) ----------------------------------------------------------------

function base64urlDecode(text) {
  if (!/^[A-Za-z0-9_-]*={0,2}$/.test(text)) throw new Error("not base64url");
  const plain = text.replace(/=+$/, "").replace(/-/g, "+").replace(/_/g, "/");
  const binary = atob(plain + "=".repeat((4 - (plain.length % 4)) % 4));
  return Uint8Array.from(binary, (c) => c.charCodeAt(0));
}

function base64urlEncode(bytes) {
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** The member parts of a composite id (version 2, then a LEB128 length and bytes per member). */
export function compositeParts(id) {
  const bytes = base64urlDecode(id);
  if (bytes[0] !== 2) throw new Error("not the id of a multiplexed stream");
  const parts = [];
  let pos = 1;
  while (pos < bytes.length) {
    let length = 0;
    let shift = 0;
    for (;;) {
      if (pos >= bytes.length || shift > 21) throw new Error("a bad length in the composite id");
      const byte = bytes[pos++];
      length |= (byte & 0x7f) << shift;
      if (!(byte & 0x80)) break;
      shift += 7;
    }
    if (pos + length > bytes.length) throw new Error("the composite id is truncated");
    parts.push(bytes.slice(pos, pos + length));
    pos += length;
  }
  return parts;
}

/** The composite id of these member parts. */
export function compositeEncode(parts) {
  const out = [2];
  for (const part of parts) {
    let length = part.length;
    while (length >= 0x80) { out.push((length & 0x7f) | 0x80); length >>>= 7; }
    out.push(length);
    out.push(...part);
  }
  return base64urlEncode(Uint8Array.from(out));
}

/** The composite id without member `index` (a member that ended is left out of the next request). */
export function compositeDrop(id, index) {
  const parts = compositeParts(id);
  if (index < 0 || index >= parts.length) throw new Error(`the id has no member ${index}`);
  parts.splice(index, 1);
  return compositeEncode(parts);
}

// -- the client ----------------------------------------------------------------------------

function routesOf(routes) {
  const list = Array.isArray(routes) ? routes : [routes];
  if (!list.length) throw new Error("open() needs at least one route");
  return list.map((route, index) => (typeof route === "string" ? { alias: String(index), path: route } : { alias: route.alias ?? String(index), path: route.path }));
}

/** A stream of one or several routes; see README.md. An EventTarget: "event", "ended", "challenge", "state", "error". */
export class SluiceStream extends EventTarget {
  constructor(routes, options = {}) {
    super();
    this.options = options;
    this.routes = routesOf(routes);
    this.multiplexed = Array.isArray(routes) && routes.length > 1;
    if (options.where && this.multiplexed) throw new Error("a where filter is taken by one route's own stream, not by several");
    this.lastEventId = options.lastEventId || "";
    this.state = "connecting";
    this.retryMs = DEFAULT_RETRY_MS;
    this._fetch = options.fetch || globalThis.fetch.bind(globalThis);
    this._backoff = options.retry?.initialMs ?? 1000;
    this._controller = null;
    this._timer = null;
    this._token = null;
    this._connect();
  }

  get members() {
    return this.multiplexed ? this.routes.map((route) => route.alias) : null;
  }

  /** The URL of the current (or next) request, without any token. */
  get url() {
    const base = this.options.base || "";
    if (!this.multiplexed) {
      const path = this.routes[0].path;
      const where = this.options.where;
      return base + path + (where ? `${path.includes("?") ? "&" : "?"}where=${encodeURIComponent(where)}` : "");
    }
    const query = new URLSearchParams(this.routes.map((route) => ["s", `${route.alias}:${route.path}`]));
    return `${base}/streams?${query}`;
  }

  pause() {
    if (this.state === "closed") return;
    this._stop();
    this._setState("paused");
  }

  resume() {
    if (this.state === "paused") this._connect();
  }

  close() {
    this._stop();
    this._setState("closed");
  }

  _stop() {
    clearTimeout(this._timer);
    this._timer = null;
    if (this._controller) this._controller.abort();
    this._controller = null;
  }

  _emit(name, detail, callback) {
    if (callback) {
      try { callback(detail); } catch (error) { queueMicrotask(() => { throw error; }); }
    }
    this.dispatchEvent(new CustomEvent(name, { detail }));
  }

  _setState(state) {
    if (this.state === state) return;
    this.state = state;
    this._emit("state", state, this.options.onState);
  }

  _fail(error) {
    this._stop();
    this._setState("closed");
    this._emit("error", { ...error, fatal: true }, this.options.onError);
  }

  _warn(error) {
    this._emit("error", { ...error, fatal: false }, this.options.onError);
  }

  _credentials() {
    return this.options.credentials || { header: "authorization", prefix: "Bearer " };
  }

  _withToken(url, headers, token) {
    if (token == null) return url;
    const credentials = this._credentials();
    if (credentials.query) {
      const pair = `${encodeURIComponent(credentials.query)}=${encodeURIComponent(token)}`;
      return `${url}${url.includes("?") ? "&" : "?"}${pair}`;
    }
    headers[credentials.header || "authorization"] = (credentials.prefix ?? "Bearer ") + token;
    return url;
  }

  async _freshToken() {
    if (!this.options.token) return null;
    return await this.options.token();
  }

  async _connect() {
    this._stop();
    this._setState("connecting");
    const controller = new AbortController();
    this._controller = controller;
    let token;
    try {
      token = await this._freshToken();
    } catch (error) {
      if (!controller.signal.aborted) this._fail({ kind: "token", message: error?.message || String(error) });
      return;
    }
    if (controller.signal.aborted) return;
    this._token = token;
    const headers = { accept: "text/event-stream" };
    if (this.lastEventId) headers["last-event-id"] = this.lastEventId;
    const url = this._withToken(this.url, headers, token);
    let delivered = false;
    try {
      const response = await this._fetch(url, { headers, signal: controller.signal, cache: "no-store" });
      if (!response.ok) {
        await this._refused(response);
        return;
      }
      if (!(response.headers.get("content-type") || "").startsWith("text/event-stream")) {
        this._fail({ kind: "protocol", status: response.status, message: "the answer is not text/event-stream" });
        return;
      }
      this._setState("open");
      delivered = await this._read(response, controller);
    } catch (error) {
      if (controller.signal.aborted) return;
      this._warn({ kind: "network", message: error?.message || String(error) });
      this._again(this._nextBackoff());
      return;
    }
    if (controller.signal.aborted) return;
    // The server ended the stream (a token's exp, a restart): reopen from the last id.
    if (delivered) this._backoff = this.options.retry?.initialMs ?? 1000;
    this._again(this.retryMs);
  }

  _nextBackoff() {
    const max = this.options.retry?.maxMs ?? 30000;
    const delay = Math.min(this._backoff, max);
    this._backoff = Math.min(this._backoff * 2, max);
    return delay / 2 + Math.random() * (delay / 2);
  }

  _again(delay) {
    this._setState("connecting");
    this._timer = setTimeout(() => this._connect(), delay);
  }

  async _refused(response) {
    const body = await response.json().catch(() => ({}));
    const error = {
      kind: "refused",
      status: response.status,
      error: body.error,
      detail: body.detail,
      member: body.member,
      reason: body.reason,
      message: body.detail || `the stream was refused (${response.status})`,
    };
    if (response.status >= 500 || response.status === 429) {
      this._warn({ ...error, kind: "network" });
      this._again(this._nextBackoff());
    } else {
      this._fail(error);
    }
  }

  async _read(response, controller) {
    const parser = parseEventStream();
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let delivered = false;
    for (;;) {
      const { value, done } = await reader.read();
      if (done || controller.signal.aborted) return delivered;
      for (const block of parser.push(value)) {
        if (block.retry !== null) this.retryMs = block.retry;
        this.lastEventId = block.id;
        if (block.type === null) continue;
        delivered = true;
        this._dispatch(block);
      }
    }
  }

  _dispatch(block) {
    const { member, type } = this.multiplexed ? memberOf(block.type) : { member: null, type: block.type };
    if (type === "challenge" && member === null) {
      this._answer(block.data);
    } else if (type === "ended" && member === null) {
      this._memberEnded(JSON.parse(block.data));
    } else {
      this._emit("event", { member, type, data: block.data, id: this.lastEventId }, this.options.onEvent);
    }
  }

  _memberEnded(ended) {
    const index = this.routes.findIndex((route) => route.alias === ended.member);
    if (index >= 0 && this.routes.length > 1) {
      this.routes.splice(index, 1);
      if (this.lastEventId) {
        try { this.lastEventId = compositeDrop(this.lastEventId, index); } catch { this.lastEventId = ""; }
      }
    }
    this._emit("ended", ended, this.options.onEnded);
  }

  // The challenge response (SPEC 4.3): the request the event names, to the stream's own URL, with a fresh token.
  async _answer(data) {
    let asked = {};
    try { asked = JSON.parse(data || "{}"); } catch { /* the defaults below */ }
    try {
      const token = await this._freshToken();
      const headers = { "content-type": CHALLENGE_TYPE, ...(asked.headers || {}) };
      const url = this._withToken(this.url, headers, token);
      let response = await this._fetch(url, { method: asked.method || "POST", headers, cache: "no-store" });
      for (let attempt = 1; attempt < CHALLENGE_ATTEMPTS && response.status === 503; attempt++) {
        const wait = Number(response.headers.get("retry-after"));
        if (!(wait >= 0) || this.state === "closed") break;
        await new Promise((resolve) => setTimeout(resolve, Math.min(wait, 30) * 1000));
        response = await this._fetch(url, { method: asked.method || "POST", headers, cache: "no-store" });
      }
      if (response.status !== 204) {
        const body = await response.json().catch(() => ({}));
        throw new Error(body.detail || `the challenge response was refused (${response.status})`);
      }
      this._emit("challenge", { answered: true }, this.options.onChallenge);
    } catch (error) {
      this._emit("challenge", { answered: false, error }, this.options.onChallenge);
      this._warn({ kind: "challenge", message: error?.message || String(error) });
    }
  }
}

/** Follow `routes` (a path, or several paths and {alias, path}); see README.md for the options. */
export function open(routes, options = {}) {
  return new SluiceStream(routes, options);
}
