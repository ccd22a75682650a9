// sluice.js under node's test runner (`npm test` in the package): the pure parts, and the client against a scripted fetch.
import { test } from "node:test";
import assert from "node:assert/strict";

import { compositeDrop, compositeEncode, compositeParts, memberOf, open, parseEventStream } from "../sluice.js";

const hex = (text) => Uint8Array.from(text.match(/../g).map((pair) => parseInt(pair, 16)));

test("the parser splits on every line end, across chunks", () => {
  const parser = parseEventStream();
  const out = [
    ...parser.push("\ufeffid: a-1\r"),
    ...parser.push("\ndata: one\r\ndata:two\n\n: comment\nevent: note\rdata:  three\r\r"),
    ...parser.push("data\n\nid: a-2\n\n"),
  ];
  assert.deepEqual(out, [
    { type: "message", data: "one\ntwo", id: "a-1", retry: null },
    { type: "note", data: " three", id: "a-1", retry: null },
    { type: "message", data: "", id: "a-1", retry: null },
    { type: null, data: null, id: "a-2", retry: null },
  ]);
});

test("retry, ids with NUL, unknown fields", () => {
  const parser = parseEventStream();
  assert.deepEqual(parser.push("retry: 1500\n\nid: x\0y\nfoo: bar\ndata: d\n\nretry: soon\n\n"), [
    { type: null, data: null, id: "", retry: 1500 },
    { type: "message", data: "d", id: "", retry: null },
  ]);
});

test("a block split between CR and LF is one line end", () => {
  const parser = parseEventStream();
  assert.deepEqual(parser.push("data: x\r"), []);
  assert.deepEqual(parser.push("\n\r\n"), [{ type: "message", data: "x", id: "", retry: null }]);
});

test("multiplexed event names", () => {
  assert.deepEqual(memberOf("scores"), { member: "scores", type: "message" });
  assert.deepEqual(memberOf("scores.delete"), { member: "scores", type: "delete" });
  assert.deepEqual(memberOf("up.tick.x"), { member: "up", type: "tick.x" });
  assert.deepEqual(memberOf("challenge"), { member: null, type: "challenge" });
  assert.deepEqual(memberOf("ended"), { member: null, type: "ended" });
});

test("composite ids: the documented example, long parts, dropping a member", () => {
  const parts = [hex("010400140204"), hex("0102002c")];
  assert.equal(compositeEncode(parts), "AgYBBAAUAgQEAQIALA");
  assert.deepEqual(compositeParts("AgYBBAAUAgQEAQIALA"), parts);
  assert.equal(compositeDrop("AgYBBAAUAgQEAQIALA", 0), compositeEncode([parts[1]]));
  const long = [new Uint8Array(0), new Uint8Array(200).fill(7), new Uint8Array(128).fill(1)];
  assert.deepEqual(compositeParts(compositeEncode(long)), long);
  assert.throws(() => compositeParts("AQQAFAIE"), /not the id of a multiplexed stream/);
  assert.throws(() => compositeParts("AgYBBAAU"), /truncated/);
  assert.throws(() => compositeDrop("AgAA", 2), /no member 2/);
});

// -- the client against a scripted server ------------------------------------------------------

function sse(body, status = 200) {
  const stream = new ReadableStream({ start(controller) { controller.enqueue(new TextEncoder().encode(body)); controller.close(); } });
  return new Response(stream, { status, headers: { "content-type": "text/event-stream" } });
}

function held(body) {
  // A stream that stays open after its first bytes (until aborted).
  const stream = new ReadableStream({ start(controller) { controller.enqueue(new TextEncoder().encode(body)); } });
  return new Response(stream, { status: 200, headers: { "content-type": "text/event-stream" } });
}

function json(status, body) {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
}

/** A fetch that answers each request with the next of `answers` and records what was asked. */
function scripted(answers) {
  const asked = [];
  const fetch = async (url, init = {}) => {
    asked.push({ url: String(url), method: init.method || "GET", headers: { ...(init.headers || {}) } });
    const next = answers.shift();
    if (!next) return new Promise((_, reject) => init.signal?.addEventListener("abort", () => reject(new Error("aborted"))));
    if (next instanceof Error) throw next;
    return typeof next === "function" ? next() : next;
  };
  return { fetch, asked };
}

function until(condition) {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const check = () => (condition() ? resolve() : Date.now() - started > 5000 ? reject(new Error("timed out")) : setTimeout(check, 2));
    check();
  });
}

const quick = { retry: { initialMs: 1, maxMs: 5 } };

test("events with the last id; a server end reopens from it with a fresh token", async () => {
  const { fetch, asked } = scripted([sse("retry: 1\nid: 1\ndata: a\n\nid: 2\nevent: delete\ndata: k\n\n"), held("id: 3\ndata: b\n\n")]);
  const events = [];
  let tokens = 0;
  const stream = open("/r", { ...quick, fetch, token: async () => `t${++tokens}`, onEvent: (e) => events.push(e) });
  await until(() => events.length === 3);
  stream.close();
  assert.deepEqual(events, [
    { member: null, type: "message", data: "a", id: "1" },
    { member: null, type: "delete", data: "k", id: "2" },
    { member: null, type: "message", data: "b", id: "3" },
  ]);
  assert.equal(asked[0].url, "/r");
  assert.equal(asked[0].headers.authorization, "Bearer t1");
  assert.equal(asked[0].headers["last-event-id"], undefined);
  assert.equal(asked[1].headers.authorization, "Bearer t2");
  assert.equal(asked[1].headers["last-event-id"], "2");
  assert.equal(stream.state, "closed");
});

test("401 and 403 stop with the server's reason", async () => {
  const body = { error: "forbidden", detail: "member b (/b): the token does not grant admin", member: "b", reason: "insufficient_roles" };
  const { fetch, asked } = scripted([json(403, body)]);
  const errors = [];
  const stream = open(["/a", { alias: "b", path: "/b" }], { ...quick, fetch, onError: (e) => errors.push(e) });
  await until(() => stream.state === "closed");
  assert.equal(asked.length, 1);
  assert.equal(asked[0].url, "/streams?s=0%3A%2Fa&s=b%3A%2Fb");
  assert.deepEqual(errors, [{ kind: "refused", status: 403, error: "forbidden", detail: body.detail, member: "b", reason: "insufficient_roles", message: body.detail, fatal: true }]);
});

test("5xx and network errors are retried with the last id", async () => {
  const { fetch, asked } = scripted([held("id: 7\ndata: x\n\n")]);
  const answers = [json(503, { error: "kafka_unavailable" }), new Error("connection refused")];
  const flaky = (url, init) => (answers.length ? Promise.resolve(answers.shift()).then((a) => { if (a instanceof Error) throw a; return a; }) : fetch(url, init));
  const events = [];
  const errors = [];
  const stream = open("/r", { ...quick, fetch: flaky, lastEventId: "6", onEvent: (e) => events.push(e), onError: (e) => errors.push(e.kind) });
  await until(() => events.length === 1);
  stream.close();
  assert.deepEqual(errors, ["network", "network"]);
  assert.equal(asked[0].headers["last-event-id"], "6");
  assert.equal(events[0].id, "7");
});

test("query credentials put the token in the URL", async () => {
  const { fetch, asked } = scripted([held(":\n\n")]);
  const stream = open("/r", { fetch, token: () => "abc", credentials: { query: "access_token" } });
  await until(() => asked.length === 1);
  stream.close();
  assert.equal(asked[0].url, "/r?access_token=abc");
  assert.equal(asked[0].headers.authorization, undefined);
});

test("a challenge is answered with the request it names, at the stream's URL", async () => {
  const challenge = 'event: challenge\ndata: {"method":"POST","headers":{"content-type":"application/x-challenge-response"}}\n\n';
  const { fetch, asked } = scripted([held(`id: AgA\n\n${challenge}`), new Response(null, { status: 204 })]);
  const answered = [];
  const stream = open(["/a"], { fetch, token: async () => "fresh", onChallenge: (c) => answered.push(c.answered) });
  await until(() => answered.length === 1);
  stream.close();
  assert.deepEqual(answered, [true]);
  assert.equal(asked[1].url, "/a");
  assert.equal(asked[1].method, "POST");
  assert.equal(asked[1].headers["content-type"], "application/x-challenge-response");
  assert.equal(asked[1].headers.authorization, "Bearer fresh");
});

test("a challenge answer refused with 503 and retry-after is sent again", async () => {
  const challenge = 'event: challenge\ndata: {"method":"POST","headers":{"content-type":"application/x-challenge-response"}}\n\n';
  const busy = new Response(JSON.stringify({ error: "reauthorization_unavailable" }), {
    status: 503,
    headers: { "content-type": "application/json", "retry-after": "0" },
  });
  const { fetch, asked } = scripted([held(`id: AgA\n\n${challenge}`), busy, new Response(null, { status: 204 })]);
  const answered = [];
  const stream = open(["/a"], { fetch, token: async () => "fresh", onChallenge: (c) => answered.push(c.answered) });
  await until(() => answered.length === 1);
  stream.close();
  assert.deepEqual(answered, [true]);
  assert.equal(asked.length, 3);
  assert.equal(asked[2].method, "POST");
});

test("a token that cannot be had after a stream ends closes it and says why", async () => {
  const { fetch } = scripted([sse("retry: 1\nid: 1\ndata: a\n\n")]);
  let calls = 0;
  const errors = [];
  const stream = open("/r", {
    fetch,
    token: async () => { if (++calls > 1) throw new Error("signed out"); return "t"; },
    onError: (e) => errors.push(e),
  });
  await until(() => stream.state === "closed");
  assert.deepEqual(errors, [{ kind: "token", message: "signed out", fatal: true }]);
});

test("a member that ended is left out of the next request and its id", async () => {
  const first = compositeEncode([hex("0102000a"), hex("0102000c")]);
  const { fetch, asked } = scripted([
    sse(`retry: 1\nid: ${first}\nevent: b\ndata: x\n\nevent: ended\ndata: {"member":"a","reason":"unauthorized"}\n\n`),
    held(":\n\n"),
  ]);
  const ended = [];
  const stream = open([{ alias: "a", path: "/a" }, { alias: "b", path: "/b" }], { ...quick, fetch, onEnded: (e) => ended.push(e) });
  await until(() => asked.length === 2);
  stream.close();
  assert.deepEqual(ended, [{ member: "a", reason: "unauthorized" }]);
  assert.deepEqual(stream.members, ["b"]);
  assert.equal(asked[1].url, "/streams?s=b%3A%2Fb");
  assert.deepEqual(compositeParts(asked[1].headers["last-event-id"]), [hex("0102000c")]);
});

test("pause and resume reopen from the last id", async () => {
  const { fetch, asked } = scripted([held("id: 4\ndata: x\n\n"), held(":\n\n")]);
  const states = [];
  const stream = open("/r", { fetch, onState: (s) => states.push(s) });
  await until(() => stream.lastEventId === "4");
  stream.pause();
  assert.equal(stream.state, "paused");
  stream.resume();
  await until(() => asked.length === 2);
  stream.close();
  assert.equal(asked[1].headers["last-event-id"], "4");
  assert.deepEqual(states, ["open", "paused", "connecting", "open", "closed"]);
});

test("the stream is an EventTarget too", async () => {
  const { fetch } = scripted([held("data: hi\n\n")]);
  const stream = open("/r", { fetch });
  const got = await new Promise((resolve) => stream.addEventListener("event", (e) => resolve(e.detail)));
  stream.close();
  assert.deepEqual(got, { member: null, type: "message", data: "hi", id: "" });
});

test("a where filter goes in the query of one route's stream, before the token", async () => {
  const { fetch, asked } = scripted([held("data: hi\n\n")]);
  const events = [];
  const stream = open("/scores/EU", {
    fetch, where: 'value.goals > 2 and value.team == "Lions"', credentials: { query: "access_token" }, token: () => "abc",
    onEvent: (e) => events.push(e),
  });
  await until(() => events.length === 1);
  stream.close();
  assert.equal(asked[0].url, "/scores/EU?where=value.goals%20%3E%202%20and%20value.team%20%3D%3D%20%22Lions%22&access_token=abc");
  assert.throws(() => open(["/a", "/b"], { fetch, where: "true" }), /one route/);
});

test("the TypeScript declarations name exactly the module's exports", async () => {
  const { readFile } = await import("node:fs/promises");
  const module = await import("../sluice.js");
  const declared = await readFile(new URL("../sluice.d.ts", import.meta.url), "utf8");
  const names = [...declared.matchAll(/^export (?:function|class) (\w+)/gm)].map((match) => match[1]);
  assert.deepEqual(names.sort(), Object.keys(module).sort());
});
