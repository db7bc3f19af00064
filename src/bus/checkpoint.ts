// The relay's durable checkpoint: the log position through which every public event is acknowledged
// by Kafka. It lives in the log itself (an internal stream, appended with the expected revision), so
// it is as durable as the events, needs no other store, and two relays cannot both advance it: the
// second writer gets WrongExpectedRevision and stops (RelayFenced).
import type { EventLog, ExpectedRevision } from '../log/event-log.js';
import { WrongExpectedRevision } from '../log/event-log.js';
import type { IdSource } from '../shared/ids.js';

export const RELAY_CHECKPOINT_STREAM = 'relay-checkpoint';
export const RELAY_CHECKPOINT_EVENT = 'relay.checkpointed';

export interface RelayCheckpoint {
  /** The last position written (0 when none), and takes ownership of the stream from here. */
  read(): Promise<number>;
  /** Writes `position`; rejects with RelayFenced when another relay wrote since read(). */
  write(position: number): Promise<void>;
}

export class RelayFenced extends Error {
  constructor(cause: WrongExpectedRevision) {
    super(`another relay advanced ${cause.stream}: this one stops`, { cause });
    this.name = 'RelayFenced';
  }
}

export const createLogCheckpoint = (log: EventLog, newId: IdSource, stream = RELAY_CHECKPOINT_STREAM): RelayCheckpoint => {
  let expected: ExpectedRevision = 'no_stream';
  return {
    async read() {
      const events = await log.readStream(stream);
      const last = events.at(-1);
      expected = last?.revision ?? 'no_stream';
      return Number(last?.data['position'] ?? 0);
    },
    async write(position) {
      try {
        const result = await log.append(stream, [{ id: newId(), type: RELAY_CHECKPOINT_EVENT, workspaceId: '', data: { position } }], expected);
        expected = result.nextRevision;
      } catch (error) {
        throw error instanceof WrongExpectedRevision ? new RelayFenced(error) : error;
      }
    },
  };
};
