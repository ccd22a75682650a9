// Types of sluice.js: follow one or several Sluice routes from a page.

/** A route to follow: its request path, and (in a multiplexed stream) the alias its events carry. */
export type Route = string | { alias?: string; path: string };

export type State = "connecting" | "open" | "paused" | "closed";

/** An event of a route. `member` is the alias in a multiplexed stream, null for one route. */
export interface SluiceEvent {
  member: string | null;
  /** "message", "delete", or an upstream's own type. */
  type: string;
  data: string;
  /** The stream's last event id after this event: open again with it to resume. */
  id: string;
}

/** A member of a multiplexed stream that ended while the others go on. */
export interface MemberEnded {
  member: string;
  reason: "unauthorized" | "route_removed" | string;
}

export interface ChallengeResult {
  answered: boolean;
  error?: Error;
}

export interface SluiceError {
  /** refused: 4xx (fatal); token: token() failed (fatal); protocol: not an event stream (fatal);
   *  network: a failure or 5xx/429 that is retried; challenge: a challenge could not be answered. */
  kind: "refused" | "token" | "protocol" | "network" | "challenge";
  message: string;
  fatal: boolean;
  status?: number;
  /** The server's JSON body: its code, detail, the member it names and the reason. */
  error?: string;
  detail?: string;
  member?: string;
  reason?: string;
}

export type Credentials = { header?: string; prefix?: string } | { query: string };

export interface Options {
  /** A fresh token for guarded routes: called to open, to answer each challenge, and to reopen. */
  token?: () => Promise<string> | string;
  /** Where the token goes: a header (default `authorization: Bearer <token>`) or a query parameter. */
  credentials?: Credentials;
  /** Resume from this id. */
  lastEventId?: string;
  /** A client filter (`?where=`) for one route that takes one; it can only narrow what the route sends. */
  where?: string;
  /** An origin or path prefix for the requests (default: the page's origin). */
  base?: string;
  /** Reconnection backoff after errors (default 1000 ms, doubling up to 30000 ms, with jitter). */
  retry?: { initialMs?: number; maxMs?: number };
  fetch?: typeof fetch;
  onEvent?: (event: SluiceEvent) => void;
  onEnded?: (ended: MemberEnded) => void;
  onChallenge?: (result: ChallengeResult) => void;
  onState?: (state: State) => void;
  onError?: (error: SluiceError) => void;
}

/** An open stream; also an EventTarget of CustomEvents "event", "ended", "challenge", "state", "error". */
export class SluiceStream extends EventTarget {
  constructor(routes: Route | Route[], options?: Options);
  readonly state: State;
  readonly lastEventId: string;
  /** The members' aliases (members that ended are gone), or null for one route. */
  readonly members: string[] | null;
  /** The URL of the current or next request, without any token. */
  readonly url: string;
  pause(): void;
  resume(): void;
  close(): void;
}

/** Follow one route (a path), or several as one multiplexed stream. */
export function open(routes: Route | Route[], options?: Options): SluiceStream;

export interface ParsedBlock {
  /** null for a block without data (it may still set the id or retry). */
  type: string | null;
  data: string | null;
  id: string;
  retry: number | null;
}

/** An incremental text/event-stream parser. */
export function parseEventStream(): { push(text: string): ParsedBlock[]; lastEventId: string };

/** A multiplexed event name as its member and type. */
export function memberOf(eventName: string): { member: string | null; type: string };

export function compositeParts(id: string): Uint8Array[];
export function compositeEncode(parts: Uint8Array[]): string;
/** The composite id without member `index`. */
export function compositeDrop(id: string, index: number): string;
