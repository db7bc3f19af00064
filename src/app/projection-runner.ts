// Keeps a read model up to date by tailing the log from its checkpoint (never from "after commit"
// hooks, which a crash loses). waitFor(position) gives read-your-writes: a command handler awaits
// the position of its last appended event before answering.
import type { EventLog, RecordedEvent } from '../log/event-log.js';

export interface ProjectionSpec {
  readonly name: string;
  readonly types: readonly string[];
  /** Position already applied (the store's checkpoint); 0 rebuilds from the start. */
  readonly checkpoint: () => Promise<number> | number;
  readonly apply: (event: RecordedEvent) => Promise<void> | void;
}

export interface ProjectionRunner {
  readonly name: string;
  /** Position of the last event this projection has seen (applied or not of its types). */
  position(): number;
  waitFor(position: number): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export const createProjectionRunner = (log: EventLog, spec: ProjectionSpec): ProjectionRunner => {
  let applied = 0;
  let waiters: { position: number; resolve: () => void }[] = [];
  let subscription: ReturnType<EventLog['subscribe']> | null = null;
  const types = new Set(spec.types);

  const advance = (position: number) => {
    applied = Math.max(applied, position);
    const ready = waiters.filter((w) => w.position <= applied);
    waiters = waiters.filter((w) => w.position > applied);
    ready.forEach((w) => w.resolve());
  };

  return {
    name: spec.name,
    position: () => applied,
    waitFor(position) {
      if (position <= applied) return Promise.resolve();
      return new Promise<void>((resolve) => waiters.push({ position, resolve }));
    },
    async start() {
      applied = await spec.checkpoint();
      // Unfiltered, so that the position advances past other types too and waitFor always resolves.
      subscription = log.subscribe({ after: applied }, async (event) => {
        if (types.has(event.type)) await spec.apply(event);
        advance(event.position);
      });
      subscription.done.catch((error: unknown) => {
        console.error(`projection ${spec.name} stopped:`, error);
      });
    },
    async stop() {
      await subscription?.stop();
      subscription = null;
    },
  };
};
