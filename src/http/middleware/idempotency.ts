// `Idempotency-Key` on POST requests. The key is claimed in the log (stream
// `idempotency-<scope>-<hash>`, scope: the workspace of the API key, or `admin`) before the route
// runs, so two servers cannot both run it; the route's commands carry the claim on their events (in
// the same append); its answer is recorded after. A retry with the same key and request gets the
// recorded answer (`Idempotent-Replayed: true`); another request with the key is 422
// IDEMPOTENCY_KEY_REUSED; a retry while the first still runs is 409 CONFLICT with Retry-After.
// Answers that changed nothing (schema 422, 429, 503) release the key instead, so a corrected or
// later retry runs (resumed, below: a request that appends to several streams may have appended
// to some before the one that refused).
// A claim whose answer a crash lost (its holder is gone, or its lease ran out) is taken over by the
// next retry, which resumes the request under the same claim (app/request-claim.ts): what the first
// run appended stands, the rest is carried out, and the answer is the one the first run would have
// given. Routes whose answer holds a secret that exists only in it (the admin routes that make API
// keys) cannot be resumed: their retry runs only if the first run wrote nothing, and is otherwise
// told the request was interrupted after writing. Routes whose answer holds a secret (a webhook's,
// an API key) mark it (ctx.state.secretAnswer): the answer is recorded sealed with the service's
// at-rest key, bound to its key's stream, so no secret is in the log in clear; a replay opens it.
import { createHash } from 'node:crypto';
import type Koa from 'koa';
import type { CommandHandler } from '../../app/command-handler.js';
import { holderGone, thisHolder } from '../../app/holder.js';
import { newClaim } from '../../app/request-claim.js';
import type { RequestScope } from '../../app/request-scope.js';
import { domainError } from '../../domain/errors.js';
import { CLAIM_METADATA, idempotencyKeyAggregate, verdictOf, type ClaimRef, type RecordedAnswer } from '../../domain/idempotency/idempotency.js';
import type { EventLog, Json } from '../../log/event-log.js';
import type { IdSource } from '../../shared/ids.js';
import { business, invalid } from '../api-error.js';
import { setHeaders } from '../response-headers.js';
import { renderFailure } from './errors.js';

/** Seals the answers that hold secrets (the webhooks' secret box: its current and previous keys). */
export interface AnswerSeal {
  encrypt(text: string, context: string): string;
  /** Throws when no key opens it (a key dropped from the ring since). */
  decrypt(sealed: string, context: string): string;
}

export interface IdempotencyOptions {
  readonly log: EventLog;
  readonly seal: AnswerSeal;
  readonly handle: CommandHandler;
  readonly newId: IdSource;
  readonly nowMs: () => number;
  /** Whether a POST to this path reaches a route (unknown paths are not claimed). */
  readonly routed: (ctx: Koa.Context) => boolean;
  /** Paths whose body the route reads itself, after the claim (uploads). */
  readonly multipart: ReadonlySet<string>;
  /** Whether an interrupted request to this route can be resumed (see above). */
  readonly resumable: (ctx: Koa.Context) => boolean;
  /** The longest a client may take to send a request (bounds how long an upload holds its claim). */
  readonly requestTimeoutMs: number;
  /** How long a claim may run before a retry takes it over (IDEMPOTENCY_LEASE_MS). */
  readonly leaseMs: number;
}

const HEADER = 'Idempotency-Key';
/** What an Idempotency-Key may be; the API document states the same pattern. */
export const IDEMPOTENCY_KEY_PATTERN = '^[\\x21-\\x7e]{1,255}$';
const VALID_KEY = new RegExp(IDEMPOTENCY_KEY_PATTERN);
/** Answers after which nothing was written: the key is released, not bound to them. */
export const NOTHING_WRITTEN: ReadonlySet<number> = new Set([429, 503]);

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** Object keys sorted at every depth: the same JSON sent with another key order is the same request. */
const canonical = (value: unknown): unknown =>
  Array.isArray(value)
    ? value.map(canonical)
    : value !== null && typeof value === 'object'
      ? Object.fromEntries(Object.keys(value).sort().map((k) => [k, canonical((value as Record<string, unknown>)[k])]))
      : value;

const fingerprintOf = (ctx: Koa.Context, multipart: boolean): string =>
  sha256(
    JSON.stringify(
      // An upload is claimed before its body is read: its declared length stands for the body.
      multipart ? [ctx.method, ctx.path, 'multipart', ctx.get('Content-Length')] : [ctx.method, ctx.path, canonical(ctx.request.body ?? null)],
    ),
  );

/** The stream that holds a key's claims and answers. */
export const idempotencyStream = (scope: string, key: string): string => `idempotency-${scope}-${sha256(key).slice(0, 40)}`;

const isSchemaFailure = (status: number, body: unknown) => status === 422 && Array.isArray((body as { detail?: unknown } | null)?.detail);

export const idempotency = (options: IdempotencyOptions): Koa.Middleware => {
  const { log, handle, newId, nowMs } = options;

  /** Whether the request that held `claimId` wrote anything: its events carry the claim. */
  const wroteUnder = async (claimId: string, after: number, workspaceId: string | undefined): Promise<boolean> => {
    const head = await log.headPosition();
    for (let from = after; from < head; ) {
      const page = await log.readAll({ after: from, limit: 1000, ...(workspaceId === undefined ? {} : { workspaceId }) });
      if (page.some((e) => e.metadata[CLAIM_METADATA] === claimId)) return true;
      const last = page.at(-1);
      if (last === undefined) break;
      from = last.position;
    }
    return false;
  };

  const replay = (ctx: Koa.Context, answer: RecordedAnswer, stream: string) => {
    let body = answer.body;
    if (answer.sealed !== undefined) {
      try {
        body = JSON.parse(options.seal.decrypt(answer.sealed, stream)) as Json;
      } catch {
        throw business(
          domainError('CONFLICT', 'The answer to the request with this Idempotency-Key was sealed with a key the service no longer has: read the resources it concerns, and use a new key to try again', {
            reason: 'idempotent_answer_lost',
          }),
        );
      }
    }
    ctx.status = answer.status;
    ctx.body = body;
    setHeaders(ctx, { 'Idempotent-Replayed': 'true' });
  };

  return async (ctx, next) => {
    // Sent empty is refused as malformed, not taken for no key: the client meant its retries to be safe.
    if (ctx.method !== 'POST' || ctx.headers[HEADER.toLowerCase()] === undefined || !options.routed(ctx)) return next();
    const key = ctx.get(HEADER);
    if (!VALID_KEY.test(key)) {
      throw invalid([{ type: 'value_error', loc: ['header', 'idempotency-key'], msg: 'Idempotency-Key should be 1 to 255 visible ASCII characters' }]);
    }
    const workspaceId: string | undefined = (ctx.state as { workspace?: { id: string } }).workspace?.id;
    // The errors middleware made it; the key's own events mark it too.
    const requestScope = ((ctx.state as { scope?: RequestScope }).scope ??= { wrote: false });
    const scope = workspaceId ?? 'admin';
    const stream = idempotencyStream(scope, key);
    const multipart = options.multipart.has(ctx.path);
    const fingerprint = fingerprintOf(ctx, multipart);
    const leaseMs = multipart ? options.requestTimeoutMs + options.leaseMs : options.leaseMs;

    const records = await log.readStream(stream);
    const state = records.reduce(idempotencyKeyAggregate.evolve, idempotencyKeyAggregate.initial);
    const verdict = verdictOf(state, fingerprint, nowMs());
    const abandoned: ClaimRef | null =
      verdict.kind === 'expired' || (verdict.kind === 'in_progress' && holderGone(verdict.holder)) ? verdict.claim : null;
    const earlier = abandoned?.claimId ?? (verdict.kind === 'run' ? verdict.resume : null);
    const resumed = earlier !== null && options.resumable(ctx);
    const claimId = resumed ? earlier : newId();
    if (abandoned !== null && !resumed) {
      const claimedAt = records.findLast((e) => e.type === 'idempotency.claimed')?.position ?? 0;
      if (await wroteUnder(abandoned.claimId, claimedAt, workspaceId)) {
        // Interrupted after writing: running it again could do it twice. Say so, for every later retry.
        const lost: RecordedAnswer = {
          status: 409,
          body: {
            error_code: 'CONFLICT',
            error_message:
              'The request with this Idempotency-Key was interrupted by a restart after it had written, in part or in whole: read the resources it concerns to see what was done, and use a new key to try again',
            detail: { reason: 'idempotent_answer_lost' },
            request_id: String(ctx.state.requestId),
          },
        };
        await handle(idempotencyKeyAggregate, stream, scope, { kind: 'answer', claim: abandoned, answer: lost, nowMs: nowMs() }, requestScope);
        return replay(ctx, lost, stream);
      }
    }

    const claimed = await handle(idempotencyKeyAggregate, stream, scope, {
      kind: 'claim',
      claimId,
      fingerprint,
      nowMs: nowMs(),
      leaseMs,
      holder: thisHolder,
      takeover: abandoned,
    }, requestScope);
    if (claimed._tag === 'Left') throw business(claimed.left, claimed.left.code === 'CONFLICT' ? { 'Retry-After': '1' } : {});
    const now = claimed.right.state;
    if (now.kind === 'answered' && claimed.right.records.length === 0) return replay(ctx, now.answer, stream);
    if (now.kind !== 'claimed') throw new Error(`idempotency key ${stream}: claimed, but the key is ${now.kind}`);
    const mine: ClaimRef = { claimId, leaseUntilMs: now.leaseUntilMs };

    // The route's commands carry the claim; the key's own events below do not.
    requestScope.claim = newClaim(claimId, resumed);
    try {
      await next();
    } catch (caught) {
      renderFailure(ctx, caught);
    } finally {
      delete requestScope.claim;
    }
    const body = (ctx.body ?? null) as Json;
    const answer: RecordedAnswer =
      (ctx.state as { secretAnswer?: true }).secretAnswer === true
        ? { status: ctx.status, body: null, sealed: options.seal.encrypt(JSON.stringify(body), stream) }
        : { status: ctx.status, body };
    const settle = NOTHING_WRITTEN.has(answer.status) || isSchemaFailure(answer.status, answer.body)
      ? ({ kind: 'release', claim: mine } as const)
      : ({ kind: 'answer', claim: mine, answer, nowMs: nowMs() } as const);
    // The answer stands even if recording it fails: the claim then expires and the log decides.
    await handle(idempotencyKeyAggregate, stream, scope, settle, requestScope).catch((error: unknown) => {
      console.error(`idempotency key ${stream}: recording the answer failed:`, error);
    });
    return undefined;
  };
};
