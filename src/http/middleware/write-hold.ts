// Holds a write of an authenticated workspace while webhook delivery asks for it (backpressure from
// the delivery engines: src/webhooks/dispatch/backpressure.ts), before its body is read, for
// at most `maxMs`; then it goes on as any other. A held request is slower, never refused and never
// lost. Only what may add events is held (POST, PUT, PATCH): a read, a long poll, a DELETE (which
// may take a subscription and its deliveries away) and every admin request go at once.
import type Koa from 'koa';
import { short } from '../api-error.js';
import type { ApiState } from '../context.js';

export interface WriteHold {
  /** Whether a write of this workspace is to wait now. */
  held(workspaceId: string): boolean;
  /** Resolves once writes no longer wait, or after `maxMs` at the latest; at once when `gone` aborts. */
  eased(maxMs: number, gone?: AbortSignal): Promise<void>;
}

/** What was held, for the metrics route: requests and the seconds they waited, since the start. */
export interface HeldWrites {
  readonly requests: number;
  readonly seconds: number;
}

const WRITES = new Set(['POST', 'PUT', 'PATCH']);
/** While writes are held, the log says so at most this often. */
const LOG_EVERY_MS = 10_000;

export const holdWrites = (hold: WriteHold, maxMs: number): { readonly middleware: Koa.Middleware<ApiState>; readonly figures: () => HeldWrites } => {
  let requests = 0;
  let seconds = 0;
  let loggedAt = -Infinity;
  let sinceLog = { requests: 0, longestMs: 0 };
  const record = (ms: number): void => {
    requests += 1;
    seconds += ms / 1000;
    sinceLog = { requests: sinceLog.requests + 1, longestMs: Math.max(sinceLog.longestMs, ms) };
    const now = performance.now();
    if (now - loggedAt < LOG_EVERY_MS) return;
    console.warn(`writes held for webhook delivery, which is behind and busy: ${sinceLog.requests} request(s) since the last line, the longest ${Math.round(sinceLog.longestMs)} ms`);
    loggedAt = now;
    sinceLog = { requests: 0, longestMs: 0 };
  };
  const middleware: Koa.Middleware<ApiState> = async (ctx, next) => {
    // Set by the API key's guard: other surfaces have no workspace here.
    const workspace = ctx.state.workspace as ApiState['workspace'] | undefined;
    if (workspace !== undefined && WRITES.has(ctx.method) && hold.held(workspace.id)) {
      const since = performance.now();
      // A client that gives up while held (its own timeout) leaves the queue at once: it would
      // otherwise keep its place until its turn, and the writes behind it would wait for nothing.
      const left = new AbortController();
      const leave = (): void => left.abort();
      if (ctx.req.socket.destroyed) leave();
      else ctx.req.socket.once('close', leave);
      try {
        await hold.eased(maxMs, left.signal);
      } finally {
        ctx.req.socket.off('close', leave);
      }
      record(performance.now() - since);
      // Nothing read, nothing done, and no one to read the answer (rendered, not logged).
      if (left.signal.aborted) throw short(400, 'The client closed the request while it was held for webhook delivery');
    }
    await next();
  };
  return { middleware, figures: () => ({ requests, seconds }) };
};
