// The tickets feature's read models: a store and a projection runner each. Reads come from the
// stores; a write route awaits `settled(position)` so the caller reads its own write.
import { createProjectionRunner, type ProjectionRunner } from '../app/projection-runner.js';
import type { Core } from '../app/core.js';
import type { RecordedEvent } from '../log/event-log.js';
import { TICKET_PROJECTIONS, type RegisteredProjection } from '../../projections/registry.js';
import { applier, type DocumentStore } from '../../projections/tickets-store.js';

const runnerOf = <D>(core: Core, registered: RegisteredProjection<D>): { store: DocumentStore<D>; runner: ProjectionRunner } => {
  const { projection } = registered;
  const store = registered.createStore(core.config);
  const runner = createProjectionRunner(core.log, { name: projection.name, types: projection.types, checkpoint: () => store.checkpoint(), apply: applier(projection, store) });
  return { store, runner };
};

export const createTicketReadModels = (core: Core) => {
  const tickets = runnerOf(core, TICKET_PROJECTIONS.tickets);
  const messages = runnerOf(core, TICKET_PROJECTIONS.messages);
  const contacts = runnerOf(core, TICKET_PROJECTIONS.contacts);
  const runners = [tickets.runner, messages.runner, contacts.runner];
  const settled = async (position: number): Promise<void> => {
    await Promise.all(runners.map((r) => r.waitFor(position)));
  };
  return {
    settled,
    /** After a command: its last event, or when it decided nothing, everything up to now (what it read). */
    async settledAfter(records: readonly RecordedEvent[]): Promise<void> {
      await settled(records.at(-1)?.position ?? (await core.log.headPosition()));
    },
    tickets: tickets.store,
    messages: messages.store,
    contacts: contacts.store,
    async start() {
      for (const runner of runners) await runner.start();
      // The embedded stores start empty: serve reads only once they have caught up with the log.
      await settled(await core.log.headPosition());
    },
    async stop() {
      for (const runner of runners) await runner.stop();
    },
  };
};

export type TicketReadModels = ReturnType<typeof createTicketReadModels>;
