// What an aggregate is: its initial state, how an event evolves it, and how a command is decided on
// it. Pure: the command handler (src/app/command-handler.ts) does the reading and the appending.
import type { Either } from 'fp-ts/lib/Either.js';
import type { JsonObject, RecordedEvent } from '../log/event-log.js';
import type { DomainError } from './errors.js';

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
