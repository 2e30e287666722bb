/**
 * One request and its response as the stages see them (`Exchange`), and the few ways a stage
 * answers: `send` (status, headers, body), `fail` (a `Failure` through the error table), and
 * `ANSWERED`, what a stage returns instead of its result once it has answered.
 *
 * ## Invariants
 * - **A stage either answers or returns its result**, never both: after `ANSWERED` the router
 *   runs no later stage, so every response is written by exactly one stage.
 * - **CORS headers go on every answer** (`send`, `fail`), over the stage's own (their `Vary`
 *   included).
 * - **A HEAD gets the GET's status and headers, no body** (`Content-Length` still counts it).
 * - **Sessions are read only from cookies this process minted** (`sessionOf`, see roomAccess.ts).
 *
 * ## Races
 * None: plain functions over one exchange.
 *
 * ## Events
 * | Channel | Fields | When |
 * |---|---|---|
 * | `audio_proxy.internal_error` | `stage`, `error`, `req` | `reportInternal`: a bug on the request path |
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Config } from '../config/index.js';
import type { Failure } from '../core/failure.js';
import {
  type InternalErrorRequest,
  type InternalErrorStage,
  publishInternalError,
} from '../telemetry/channels.js';
import { errorResponse } from './errors.js';
import { SessionCookies } from './roomAccess.js';
import type { HandlerObservers, HandlerServices } from './services.js';
import type { TurnBudget } from './turns.js';

export type Endpoint =
  | 'render'
  | 'info'
  | 'warm'
  | 'purge'
  | 'health'
  | 'ready'
  | 'metrics'
  | 'preflight'
  | 'unknown';

/** A stopping node's Retry-After: another node (or this one restarted) can answer at once. */
export const SHUTTING_DOWN_RETRY_AFTER_S = 1;

/** What a stage returns instead of its result once it has answered the request. */
export const ANSWERED: unique symbol = Symbol('answered');
export type Answered = typeof ANSWERED;

export interface Exchange {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly head: boolean;
  readonly cors: Record<string, string>;
  endpoint: Endpoint;
  /** Spreads request stages over loop turns under a burst (see `turns.ts`). */
  readonly turns: TurnBudget;
  /** Where an unexpected exception would be reported from (the metric's `stage` label). */
  stage: InternalErrorStage;
  /** The `x-audio-proxy` status sent, for the access log. */
  cache?: 'HIT' | 'MISS' | 'COALESCED';
}

/** What every stage may read: this request's config snapshot and the system's services. */
export interface StageContext {
  readonly config: Config;
  readonly services: HandlerServices;
  readonly observers: HandlerObservers;
}

export const JSON_NO_STORE: Readonly<Record<string, string>> = Object.freeze({
  'content-type': 'application/json; charset=utf-8',
  'cache-control': 'no-store',
});

export function json(body: unknown): string {
  return JSON.stringify(body);
}

export function send(
  x: Exchange,
  status: number,
  headers: Record<string, string>,
  body?: string | Buffer,
): void {
  const all: Record<string, string | number> = { ...headers, ...x.cors };
  if (headers.vary && x.cors.vary) all.vary = x.cors.vary;
  if (body !== undefined) all['content-length'] = Buffer.byteLength(body);
  x.res.writeHead(status, all);
  x.res.end(x.head ? undefined : body);
}

export function fail(x: Exchange, failure: Failure): void {
  const r = errorResponse(failure);
  send(x, r.status, { ...r.headers }, r.body);
}

/** Goes on now while the loop turn has budget left, else in a later turn (see `turns.ts`). */
export function nextStage(x: Exchange): Promise<void> | undefined {
  return x.turns.pass();
}

/** A client's `x-request-id` is logged only if it looks like an id (no log injection). */
const REQUEST_ID_SHAPE = /^[\w.:-]{1,128}$/;

function requestOf(req: IncomingMessage): InternalErrorRequest {
  const id = req.headers['x-request-id'];
  return {
    method: req.method ?? 'GET',
    path: (req.url ?? '/').split('?', 1)[0]!,
    ...(typeof id === 'string' && REQUEST_ID_SHAPE.test(id) ? { id } : {}),
  };
}

/** A bug on the request path: logged at error level with the request and counted. */
export function reportInternal(
  x: Exchange,
  error: unknown,
  stage: InternalErrorStage = x.stage,
): void {
  publishInternalError(stage, error, requestOf(x.req));
}

/** Session ids are minted and verified under one key per process (see roomAccess.ts). */
export const sessions = new SessionCookies();

/** The session a request's cookie names, only if this process issued it. */
export function sessionOf(req: IncomingMessage): string | undefined {
  return sessions.read(req.headers.cookie);
}
