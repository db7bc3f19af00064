// The relay's durable checkpoint: the log position through which every public event is acknowledged
// by Kafka. It lives in the log itself (internal streams, appended with the expected revision), so
// it is as durable as the events, needs no other store, and two relays cannot both advance it: the
// second writer gets WrongExpectedRevision and stops (RelayFenced).
//
// It stays small in generations: each write appends to the current generation's stream; once that
// holds `generationSize` events, the next generation is named in the pointer stream, opened with the
// same position, and the generations before it are deleted. Generation 0 is `relay-checkpoint`, the
// one stream of earlier versions, so an upgraded deployment keeps its position. A generation is
// deleted only once its successor has an event, so when a crash left the newest one empty, the one
// before holds the position.
//
// Fencing: every append states its expected revision, and every write then checks that the pointer
// has not moved since this relay last saw it. A generation is deleted only after the pointer moved
// past it, and a deleted stream can be written again with `no_stream`: that check is what fences a
// relay whose generation another one has moved on from.
import type { EventLog, ExpectedRevision, NewEvent, RecordedEvent } from '../log/event-log.js';
import { WrongExpectedRevision } from '../log/event-log.js';
import type { IdSource } from '../shared/ids.js';

export const RELAY_CHECKPOINT_STREAM = 'relay-checkpoint';
export const RELAY_CHECKPOINT_GENERATIONS_STREAM = 'relay-checkpoint-generations';
export const RELAY_CHECKPOINT_EVENT = 'relay.checkpointed';
export const RELAY_CHECKPOINT_GENERATION_EVENT = 'relay.checkpoint_generation_started';

/** Writes per generation: a relay writes at most about one a second, so a new generation every ~17 minutes under load. */
const DEFAULT_GENERATION_SIZE = 1000;

export const generationStream = (generation: number): string =>
  generation === 0 ? RELAY_CHECKPOINT_STREAM : `${RELAY_CHECKPOINT_STREAM}-${generation}`;

export interface RelayCheckpoint {
  /** The last position written (0 when none), and takes ownership of the checkpoint from here. */
  read(): Promise<number>;
  /** Writes `position`; rejects with RelayFenced when another relay wrote since read(). */
  write(position: number): Promise<void>;
}

export interface LogCheckpointOptions {
  /** Events a generation holds before the next one starts (default 1000). */
  readonly generationSize?: number;
}

export class RelayFenced extends Error {
  constructor(cause: WrongExpectedRevision) {
    super(`another relay advanced ${cause.stream}: this one stops`, { cause });
    this.name = 'RelayFenced';
  }
}

const positionOf = (events: readonly RecordedEvent[]): number | undefined => {
  const last = events.at(-1);
  return last === undefined ? undefined : Number(last.data['position']);
};

export const createLogCheckpoint = (log: EventLog, newId: IdSource, options: LogCheckpointOptions = {}): RelayCheckpoint => {
  const generationSize = options.generationSize ?? DEFAULT_GENERATION_SIZE;
  const pointer = RELAY_CHECKPOINT_GENERATIONS_STREAM;
  let generation = 0;
  let pointerRevision: number | 'no_stream' = 'no_stream';
  let expected: ExpectedRevision = 'no_stream';

  const internal = (type: string, data: NewEvent['data']): NewEvent[] => [{ id: newId(), type, workspaceId: '', data }];

  const ensurePointerUnmoved = async (): Promise<void> => {
    const moved = await log.readStream(pointer, pointerRevision === 'no_stream' ? 0 : pointerRevision + 1);
    const last = moved.at(-1);
    if (last !== undefined) throw new WrongExpectedRevision(pointer, pointerRevision, last.revision);
  };

  /** Appends to the current generation; resolves with the revision written. */
  const append = async (position: number): Promise<number> => {
    const { nextRevision } = await log.append(generationStream(generation), internal(RELAY_CHECKPOINT_EVENT, { position }), expected);
    expected = nextRevision;
    await ensurePointerUnmoved();
    return nextRevision;
  };

  const startNextGeneration = async (): Promise<void> => {
    const next = generation + 1;
    const started = await log.append(pointer, internal(RELAY_CHECKPOINT_GENERATION_EVENT, { generation: next }), pointerRevision);
    pointerRevision = started.nextRevision;
    generation = next;
    expected = 'no_stream';
  };

  /** Once the current generation has an event: the one before (and one a crash may have left) are no longer read. */
  const deletePrevious = async (): Promise<void> => {
    for (const older of [generation - 1, generation - 2].filter((g) => g >= 0)) await log.deleteStream(generationStream(older));
  };

  const advance = async (position: number): Promise<void> => {
    const opening = expected === 'no_stream';
    const revision = await append(position);
    if (opening) return deletePrevious();
    if (revision + 1 < generationSize) return;
    await startNextGeneration();
    return advance(position);
  };

  return {
    async read() {
      const generations = await log.readStream(pointer);
      const last = generations.at(-1);
      generation = Number(last?.data['generation'] ?? 0);
      pointerRevision = last?.revision ?? 'no_stream';
      const current = await log.readStream(generationStream(generation));
      expected = current.at(-1)?.revision ?? 'no_stream';
      // Empty after a crash between naming it and its first write: the one before is still there.
      const previous = current.length === 0 && generation > 0 ? await log.readStream(generationStream(generation - 1)) : [];
      return positionOf(current) ?? positionOf(previous) ?? 0;
    },
    async write(position) {
      try {
        await advance(position);
      } catch (error) {
        throw error instanceof WrongExpectedRevision ? new RelayFenced(error) : error;
      }
    },
  };
};
