// Runs commands against a stream: read, fold with evolve, decide, append with the expected revision.
// Commands on one stream never race each other inside a process: they queue per stream, and those
// waiting while an append is in flight are decided together, in order, against the state each
// leaves, and appended as one batch (one commit for all of them). Only another process can make an
// append lose its race; the batch is then read, decided and appended again after a jittered pause,
// until a bound passes and it fails with StreamContended (503 with Retry-After, never a 500).
// Under an idempotency claim that is resumed (app/request-claim.ts), a command whose events its
// stream already holds (same claim, same step) is answered with them instead of being decided again.
// A command may bring its own appender (the ticket's creation appends with its quota count, in one
// commit): it is then decided and appended alone, through it.
// With a StateCache, the state folded last for a stream is kept with its revision and only the
// events after it are read: exact for streams that are never deleted (the cache's users' streams).
import { setTimeout as sleep } from 'node:timers/promises';
import type { Either } from 'fp-ts/lib/Either.js';
import type { Aggregate } from '../domain/aggregate.js';
import type { DomainError } from '../domain/errors.js';
import { CLAIM_METADATA, STEP_METADATA } from '../domain/idempotency/idempotency.js';
import { WrongExpectedRevision, type AppendResult, type EventLog, type ExpectedRevision, type NewEvent, type RecordedEvent } from '../log/event-log.js';
import type { IdSource } from '../shared/ids.js';
import { createBoundedCache, type BoundedCache } from '../shared/bounded-cache.js';
import { nextStep } from './request-claim.js';
import type { RequestScope } from './request-scope.js';

export interface CommandResult<S> {
  readonly state: S;
  readonly records: readonly RecordedEvent[];
}

/** How long a batch keeps retrying lost races with other processes before it gives up. */
const CONTENTION_BOUND_MS = 3_000;
/** The most commands decided into one append. */
const MAX_BATCH = 256;

/** Another process kept winning the stream's races for longer than the bound: retry later. */
export class StreamContended extends Error {
  constructor(readonly stream: string) {
    super(`stream ${stream} stayed contended past the bound`);
    this.name = 'StreamContended';
  }
}

type Outcome =
  | { readonly pending: Pending; readonly refused: Either<DomainError, never> }
  | { readonly pending: Pending; readonly state: unknown; readonly events: readonly NewEvent[] }
  | { readonly pending: Pending; readonly bug: unknown };

/** Full jitter: a random pause up to an exponentially growing cap, so racing processes spread out. */
const backoff = (attempt: number) => sleep(Math.random() * Math.min(250, 5 * 2 ** attempt));

/** Appends a command's events in place of `log.append`, with its semantics (and maybe more in the same commit). */
export type Appender = (stream: string, events: readonly NewEvent[], expected: ExpectedRevision) => Promise<AppendResult>;

interface Pending {
  readonly aggregate: Aggregate<unknown, unknown>;
  /** The command's own appender: it runs in a batch of its own. */
  readonly appender: Appender | undefined;
  readonly workspaceId: string;
  /** The idempotency claim of the request that issued the command and its step (recorded on its events). */
  readonly claim: { readonly id: string; readonly step: number } | undefined;
  /** The scope of the request that issued the command: marked once its events are appended (app/request-scope.ts). */
  readonly scope: RequestScope | undefined;
  readonly command: unknown;
  readonly resolve: (result: Either<DomainError, CommandResult<unknown>>) => void;
  readonly reject: (error: unknown) => void;
}

export const loadState = async <S>(log: EventLog, stream: string, evolve: Aggregate<S, unknown>['evolve'], initial: S) => {
  const events = await log.readStream(stream);
  const last = events.at(-1);
  return { state: events.reduce(evolve, initial), revision: last === undefined ? ('no_stream' as const) : last.revision };
};

interface Folded {
  /** The aggregate whose evolve folded `state`: a stream's cache entry serves that aggregate only. */
  readonly aggregate: unknown;
  readonly state: unknown;
  readonly revision: number;
}

export type StateCache = BoundedCache<Folded>;

/** The states of up to `capacity` streams, those commands use kept (bounded-cache.ts). */
export const createStateCache = (capacity: number): StateCache => createBoundedCache<Folded>(capacity);

export interface CommandHandlerOptions {
  /** How long a batch keeps retrying races lost to other processes (default 3 s). */
  readonly contentionBoundMs?: number;
}

export const createCommandHandler = (log: EventLog, newId: IdSource, cache?: StateCache, options: CommandHandlerOptions = {}) => {
  const { contentionBoundMs = CONTENTION_BOUND_MS } = options;
  const remember = (stream: string, folded: Folded) => {
    // Concurrent commands may finish out of order: keep the later revision.
    if ((cache?.get(stream)?.revision ?? -1) <= folded.revision) cache?.set(stream, folded);
  };

  /** The stream's state: the cached one caught up with what was appended since, else a full read. */
  const current = async <S>(aggregate: Aggregate<S, never>, stream: string) => {
    const cached = cache?.get(stream);
    const from = cached?.aggregate === aggregate ? cached : undefined;
    const events = await log.readStream(stream, from === undefined ? 0 : from.revision + 1);
    const state = events.reduce(aggregate.evolve, from === undefined ? aggregate.initial : (from.state as S));
    const revision = events.at(-1)?.revision ?? from?.revision;
    if (revision !== undefined && events.length > 0) remember(stream, { aggregate, state, revision });
    return { state, revision: revision ?? ('no_stream' as const) };
  };

  /** Decides `batch` in order against the stream's state and appends what it decided as one batch. */
  const attempt = async (stream: string, batch: readonly Pending[]) => {
    const aggregate = batch[0]?.aggregate as Aggregate<unknown, unknown>;
    const { state, revision } = await current(aggregate, stream);
    let folded = state;
    const outcomes = batch.map((pending): Outcome => {
      try {
        const decision = aggregate.decide(pending.command, folded);
        if (decision._tag === 'Left') return { pending, refused: decision };
        folded = decision.right.reduce(aggregate.evolve, folded);
        const metadata = pending.claim === undefined ? {} : { metadata: { [CLAIM_METADATA]: pending.claim.id, [STEP_METADATA]: pending.claim.step } };
        return { pending, state: folded, events: decision.right.map((e) => ({ id: newId(), type: e.type, workspaceId: pending.workspaceId, data: e.data, ...metadata })) };
      } catch (bug) {
        // A command that breaks the domain fails alone; the others in its batch go on.
        return { pending, bug };
      }
    });
    const events = outcomes.flatMap((o) => ('events' in o ? o.events : []));
    let records: readonly RecordedEvent[] = [];
    if (events.length > 0) {
      const appender = batch.length === 1 ? batch[0]?.appender : undefined;
      const appended = await (appender === undefined ? log.append(stream, events, revision) : appender(stream, events, revision));
      records = appended.records;
      remember(stream, { aggregate, state: folded, revision: appended.nextRevision });
    }
    // Answers only once the append has landed: a refusal decided on a state that lost its race is
    // decided again with the rest.
    let next = 0;
    for (const outcome of outcomes) {
      if ('bug' in outcome) outcome.pending.reject(outcome.bug);
      else if ('refused' in outcome) outcome.pending.resolve(outcome.refused);
      else {
        if (outcome.pending.scope !== undefined && outcome.events.length > 0) outcome.pending.scope.wrote = true;
        outcome.pending.resolve({ _tag: 'Right', right: { state: outcome.state, records: records.slice(next, next + outcome.events.length) } });
        next += outcome.events.length;
      }
    }
  };

  const run = async (stream: string, batch: readonly Pending[]) => {
    const deadline = Date.now() + contentionBoundMs;
    for (let round = 1; ; round++) {
      try {
        return await attempt(stream, batch);
      } catch (error) {
        cache?.delete(stream);
        if (!(error instanceof WrongExpectedRevision)) return batch.forEach((p) => p.reject(error));
        if (Date.now() >= deadline) return batch.forEach((p) => p.reject(new StreamContended(stream)));
        await backoff(round);
      }
    }
  };

  const queues = new Map<string, Pending[]>();

  /** Runs the stream's queue until it is empty: whatever arrived meanwhile goes in the next batch. */
  const drain = async (stream: string, queue: Pending[]) => {
    while (queue.length > 0) {
      const first = queue[0] as Pending;
      let size = 1;
      const joins = (next: Pending | undefined) => next?.aggregate === first.aggregate && next.appender === undefined && first.appender === undefined;
      while (size < Math.min(queue.length, MAX_BATCH) && joins(queue[size])) size += 1;
      await run(stream, queue.splice(0, size));
    }
    queues.delete(stream);
  };

  const enqueue = (stream: string, pending: Pending) => {
    const queue = queues.get(stream);
    if (queue !== undefined) {
      queue.push(pending);
      return;
    }
    const fresh = [pending];
    queues.set(stream, fresh);
    void drain(stream, fresh);
  };

  /** What an earlier run of the claim appended for this step of it, and the state they left. */
  const appendedBefore = async (pending: Pending, stream: string): Promise<CommandResult<unknown> | null> => {
    const { aggregate, claim } = pending;
    const events = await log.readStream(stream);
    const mine = (e: RecordedEvent) => e.metadata[CLAIM_METADATA] === claim?.id && e.metadata[STEP_METADATA] === claim?.step;
    const last = events.findLastIndex(mine);
    if (last < 0) return null;
    return { state: events.slice(0, last + 1).reduce(aggregate.evolve, aggregate.initial), records: events.filter(mine) };
  };

  return function handle<S, C>(
    aggregate: Aggregate<S, C>,
    stream: string,
    workspaceId: string,
    command: C,
    scope: RequestScope | undefined,
    appender?: Appender,
  ): Promise<Either<DomainError, CommandResult<S>>> {
    return new Promise((resolve, reject) => {
      const claim = scope?.claim;
      // Steps are counted when the command is issued, so they follow the request's own order.
      const step = claim === undefined ? undefined : { id: claim.id, step: nextStep(claim, stream) };
      const pending = { aggregate, appender, workspaceId, claim: step, scope, command, resolve, reject } as unknown as Pending;
      if (claim?.resumed !== true) return enqueue(stream, pending);
      appendedBefore(pending, stream).then(
        (done) => (done === null ? enqueue(stream, pending) : resolve({ _tag: 'Right', right: done as CommandResult<S> })),
        reject,
      );
    });
  };
};

export type CommandHandler = ReturnType<typeof createCommandHandler>;
