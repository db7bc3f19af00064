// The tickets feature's read models: a store and a projection runner each. Reads come from the
// stores; a write route awaits `settled(position)` so the caller reads its own write. Where the
// stores are out of reach (Redis down, in the distributed mode), reads and commands are refused with
// 503 SERVICE_UNAVAILABLE before anything is written, rather than hang or half-succeed.
import { createProjectionRunner, type ProjectionRunner } from '../app/projection-runner.js';
import type { Core } from '../app/core.js';
import { unavailable } from '../http/api-error.js';
import type { EventLog, RecordedEvent } from '../log/event-log.js';
import { TICKET_PROJECTIONS } from '../../projections/registry.js';
import { applier, StoreUnavailable, type DocumentProjection, type DocumentStore } from '../../projections/tickets-store.js';

const refused = () => unavailable('Tickets and contacts are unavailable for a moment: retry shortly');

/** The store's reads, refused while the stores are out of reach (a read that cannot reach them is a 503 too). */
const guarded = <D>(store: DocumentStore<D>, available: () => boolean): DocumentStore<D> => {
  const read =
    <A extends unknown[], R>(call: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      if (!available()) throw refused();
      try {
        return await call(...args);
      } catch (error) {
        throw error instanceof StoreUnavailable ? refused() : error;
      }
    };
  return { ...store, get: read(store.get), list: read(store.list) };
};

/**
 * Where the store stands in this log. A shared store outlives the log it was built from (a Redis kept
 * while the log was reset): its checkpoint event must be in this log, else it is cleared and rebuilt.
 */
const checkpointIn = async <D>(log: EventLog, store: DocumentStore<D>, name: string): Promise<number> => {
  const at = await store.checkpoint();
  if (at === null) return 0;
  const [event] = await log.readStream(at.stream, at.revision);
  if (event?.id === at.id && event.position === at.position) return at.position;
  console.warn(`read model ${name}: its store was built from another log (event ${at.id} at ${at.position} is not in this one): rebuilding it`);
  await store.clear();
  return 0;
};

/** How often a wait for the read models to apply a write looks whether their store is still reachable. */
const AVAILABILITY_CHECK_MS = 50;

/** How long a starting server waits for an unreachable store before it serves without it (503s). */
const CONNECT_WAIT_MS = 3_000;

export const createTicketReadModels = (core: Core) => {
  // Reads and commands are served once the stores can be reached and have caught up with the log, at
  // start and after a reset (a store rebuilt after Redis came back empty would list part of the data).
  let caughtUp = false;
  const available = () => caughtUp && core.documents.available() && !runners.some((runner) => runner.catchingUp());
  const runnerOf = <D>(projection: DocumentProjection<D>): { store: DocumentStore<D>; runner: ProjectionRunner } => {
    const store = core.documents.open(projection);
    const runner = createProjectionRunner(core.log, {
      name: projection.name,
      types: projection.types,
      checkpoint: () => checkpointIn(core.log, store, projection.name),
      apply: applier(projection, store),
    });
    return { store: guarded(store, available), runner };
  };
  const tickets = runnerOf(TICKET_PROJECTIONS.tickets);
  const messages = runnerOf(TICKET_PROJECTIONS.messages);
  const contacts = runnerOf(TICKET_PROJECTIONS.contacts);
  const runners = [tickets.runner, messages.runner, contacts.runner];
  /** Resolves once every read model has applied `position`; 503 once the stores are out of reach (the wait would not end). */
  const applied = async (position: number): Promise<void> => {
    await Promise.all(runners.map((r) => r.waitFor(position)));
  };
  // The waits under way hear an outage from one check every AVAILABILITY_CHECK_MS while any is
  // waiting, not from a timer each (one per write request).
  const waiting = new Set<(error: unknown) => void>();
  let outageCheck: NodeJS.Timeout | null = null;
  const checkOutage = () => {
    if (waiting.size === 0 && outageCheck !== null) {
      clearInterval(outageCheck);
      outageCheck = null;
    } else if (!available()) {
      const error = refused();
      const refusedNow = [...waiting];
      waiting.clear();
      refusedNow.forEach((reject) => reject(error));
    }
  };
  const settled = (position: number): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      waiting.add(reject);
      outageCheck ??= setInterval(checkOutage, AVAILABILITY_CHECK_MS);
      applied(position)
        .then(resolve, reject)
        .finally(() => waiting.delete(reject));
    });
  return {
    settled,
    /** Throws the 503 while the stores are out of reach: commands call it before they write. */
    assertAvailable(): void {
      if (!available()) throw refused();
    },
    /** After a command: its last event, or when it decided nothing, everything up to now (what it read). */
    async settledAfter(records: readonly RecordedEvent[]): Promise<void> {
      await settled(records.at(-1)?.position ?? (await core.log.headPosition()));
    },
    tickets: tickets.store,
    messages: messages.store,
    contacts: contacts.store,
    async start() {
      // Redis may come back empty (no persistence): each projection checks its epoch and rebuilds if so.
      core.documents.onReconnect(() => runners.forEach((runner) => runner.resume('its store is reachable again')));
      const startup = (async () => {
        for (const runner of runners) await runner.start();
        // Serve reads only once the stores have caught up with the log (from their checkpoints, or empty).
        await applied(await core.log.headPosition());
        caughtUp = true;
      })();
      if (await core.documents.connected(CONNECT_WAIT_MS)) return startup;
      // The rest of the service (the log, /updates, webhooks) does not need this store: start without it.
      console.warn('read models: their store cannot be reached; tickets and contacts answer 503 until it can');
      startup.catch((error: unknown) => console.error('read models: start failed:', error));
    },
    async stop() {
      for (const runner of runners) await runner.stop();
    },
  };
};

export type TicketReadModels = ReturnType<typeof createTicketReadModels>;
