// Runs one command against one stream: read, fold with evolve, decide, append with the expected
// revision. A command that loses the race re-reads, re-decides and retries a bounded number of times.
// With a StateCache, the state folded last for a stream is kept with its revision and only the
// events after it are read: exact for streams that are never deleted (the cache's users' streams).
import type { Either } from 'fp-ts/lib/Either.js';
import type { DomainError } from '../domain/errors.js';
import { WrongExpectedRevision, type EventLog, type JsonObject, type RecordedEvent } from '../log/event-log.js';
import type { IdSource } from '../shared/ids.js';
import { createFifoCache, type FifoCache } from './fifo-cache.js';

/** An event as the domain decides it: type and data; ids and the stream are the handler's business. */
export interface Decided {
  readonly type: string;
  readonly data: JsonObject;
}

export interface Aggregate<S, C> {
  readonly initial: S;
  readonly evolve: (state: S, event: Pick<RecordedEvent, 'type' | 'data'>) => S;
  readonly decide: (command: C, state: S) => Either<DomainError, readonly Decided[]>;
}

export interface CommandResult<S> {
  readonly state: S;
  readonly records: readonly RecordedEvent[];
}

const MAX_ATTEMPTS = 8;

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

export type StateCache = FifoCache<Folded>;

/** The states of the last `capacity` streams cached. */
export const createStateCache = (capacity: number): StateCache => createFifoCache<Folded>(capacity);

export const createCommandHandler = (log: EventLog, newId: IdSource, cache?: StateCache) => {
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

  return async function handle<S, C>(
    aggregate: Aggregate<S, C>,
    stream: string,
    workspaceId: string,
    command: C,
  ): Promise<Either<DomainError, CommandResult<S>>> {
    for (let attempt = 1; ; attempt++) {
      const { state, revision } = await current(aggregate, stream);
      const decision = aggregate.decide(command, state);
      if (decision._tag === 'Left') return decision;
      const decided = decision.right;
      if (decided.length === 0) return { _tag: 'Right', right: { state, records: [] } };
      try {
        const events = decided.map((e) => ({ id: newId(), type: e.type, workspaceId, data: e.data }));
        const { records, nextRevision } = await log.append(stream, events, revision);
        const next = decided.reduce(aggregate.evolve, state);
        remember(stream, { aggregate, state: next, revision: nextRevision });
        return { _tag: 'Right', right: { state: next, records } };
      } catch (error) {
        cache?.delete(stream);
        if (!(error instanceof WrongExpectedRevision) || attempt >= MAX_ATTEMPTS) throw error;
      }
    }
  };
};

export type CommandHandler = ReturnType<typeof createCommandHandler>;
