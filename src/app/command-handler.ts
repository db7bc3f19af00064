// Runs one command against one stream: read, fold with evolve, decide, append with the expected
// revision. A command that loses the race re-reads, re-decides and retries a bounded number of times.
import type { Either } from 'fp-ts/lib/Either.js';
import type { DomainError } from '../domain/errors.js';
import { WrongExpectedRevision, type EventLog, type JsonObject, type RecordedEvent } from '../log/event-log.js';
import type { IdSource } from '../shared/ids.js';

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

export const createCommandHandler = (log: EventLog, newId: IdSource) =>
  async function handle<S, C>(
    aggregate: Aggregate<S, C>,
    stream: string,
    workspaceId: string,
    command: C,
  ): Promise<Either<DomainError, CommandResult<S>>> {
    for (let attempt = 1; ; attempt++) {
      const { state, revision } = await loadState(log, stream, aggregate.evolve, aggregate.initial);
      const decision = aggregate.decide(command, state);
      if (decision._tag === 'Left') return decision;
      const decided = decision.right;
      if (decided.length === 0) return { _tag: 'Right', right: { state, records: [] } };
      try {
        const events = decided.map((e) => ({ id: newId(), type: e.type, workspaceId, data: e.data }));
        const { records } = await log.append(stream, events, revision);
        return { _tag: 'Right', right: { state: decided.reduce(aggregate.evolve, state), records } };
      } catch (error) {
        if (!(error instanceof WrongExpectedRevision) || attempt >= MAX_ATTEMPTS) throw error;
      }
    }
  };

export type CommandHandler = ReturnType<typeof createCommandHandler>;
