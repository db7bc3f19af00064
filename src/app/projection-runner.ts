// Keeps read models up to date by tailing the log from their checkpoints (never from "after commit"
// hooks, which a crash loses). waitFor(position) gives read-your-writes: a command handler awaits
// the position of its last appended event before answering.
//
// All runners of one log share ONE subscription (a ProjectionTail): each event is read and parsed
// once and handed to every projection, instead of once per projection. A runner that starts behind
// the tail (its checkpoint is older) catches up with reads of its own, then joins the tail.
import type { EventLog, LogSubscription, RecordedEvent } from '../log/event-log.js';

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

export interface ProjectionTail {
  /** A runner fed by this tail. */
  runner(spec: ProjectionSpec): ProjectionRunner;
}

const CATCH_UP_PAGE = 1000;

interface Waiter {
  readonly position: number;
  readonly resolve: () => void;
}

/** Position bookkeeping and waitFor of one projection. */
const progress = () => {
  let applied = 0;
  let waiters: Waiter[] = [];
  // The lowest position waited for: most events resolve nobody, and then cost one comparison.
  let lowest = Infinity;
  return {
    applied: () => applied,
    reset(position: number) {
      applied = position;
    },
    advance(position: number) {
      applied = position;
      if (applied < lowest) return;
      const ready = waiters.filter((w) => w.position <= applied);
      waiters = waiters.filter((w) => w.position > applied);
      lowest = waiters.reduce((min, w) => Math.min(min, w.position), Infinity);
      ready.forEach((w) => w.resolve());
    },
    waitFor(position: number): Promise<void> {
      if (position <= applied) return Promise.resolve();
      lowest = Math.min(lowest, position);
      return new Promise<void>((resolve) => waiters.push({ position, resolve }));
    },
  };
};

interface Member {
  readonly spec: ProjectionSpec;
  readonly types: ReadonlySet<string>;
  readonly progress: ReturnType<typeof progress>;
  /** Fed by the tail (else still catching up, or stopped). */
  live: boolean;
}

export const createProjectionTail = (log: EventLog): ProjectionTail => {
  const members = new Set<Member>();
  // Position of the event the tail is delivering or last delivered: set BEFORE it is handed out,
  // so a member that has applied up to `head` cannot miss an event by joining mid-delivery.
  let head = 0;
  let tail: Promise<LogSubscription> | null = null;
  // A stopped tail may still be finishing an event while a new one starts: only the newest delivers.
  let generation = 0;

  const fail = (member: Member, error: unknown) => {
    members.delete(member);
    member.live = false;
    console.error(`projection ${member.spec.name} stopped:`, error);
  };

  /** Applies one event to one member; a promise only when its apply is asynchronous. */
  const feed = (member: Member, event: RecordedEvent): Promise<void> | undefined => {
    if (!member.types.has(event.type)) {
      member.progress.advance(event.position);
      return undefined;
    }
    let applied: Promise<void> | void;
    try {
      applied = member.spec.apply(event);
    } catch (error) {
      fail(member, error);
      return undefined;
    }
    if (applied === undefined) {
      member.progress.advance(event.position);
      return undefined;
    }
    return applied.then(
      () => member.progress.advance(event.position),
      (error: unknown) => fail(member, error),
    );
  };

  const deliver = (event: RecordedEvent): Promise<void> | undefined => {
    head = event.position;
    let pending: Promise<void>[] | undefined;
    for (const member of members) {
      if (!member.live || event.position <= member.progress.applied()) continue;
      const applying = feed(member, event);
      if (applying !== undefined) (pending ??= []).push(applying);
    }
    // Members apply concurrently; the next event waits for all of them (each keeps log order).
    return pending === undefined ? undefined : Promise.all(pending).then(() => undefined);
  };

  const startTail = async (): Promise<LogSubscription> => {
    const mine = ++generation;
    head = await log.headPosition();
    const subscription = log.subscribe({ after: head }, (event) => (mine === generation ? deliver(event) : undefined));
    subscription.done.catch((error: unknown) => console.error('projection log tail stopped:', error));
    return subscription;
  };

  /** Reads the log from the member's checkpoint until it has reached the tail, then goes live. */
  const catchUp = async (member: Member) => {
    await (tail ??= startTail());
    while (members.has(member)) {
      // Checked right after an await and before the next: nothing can be delivered in between.
      if (member.progress.applied() >= head) {
        member.live = true;
        return;
      }
      const events = await log.readAll({ after: member.progress.applied(), limit: CATCH_UP_PAGE });
      for (const event of events) {
        if (!members.has(member)) return;
        await feed(member, event);
      }
    }
  };

  return {
    runner(spec) {
      const member: Member = { spec, types: new Set(spec.types), progress: progress(), live: false };
      return {
        name: spec.name,
        position: () => member.progress.applied(),
        waitFor: (position) => member.progress.waitFor(position),
        async start() {
          member.progress.reset(await spec.checkpoint());
          members.add(member);
          void catchUp(member).catch((error: unknown) => fail(member, error));
        },
        async stop() {
          members.delete(member);
          member.live = false;
          if (members.size > 0 || tail === null) return;
          const stopping = tail;
          tail = null;
          generation += 1;
          await (await stopping).stop();
        },
      };
    },
  };
};

// One tail per log, so that every feature's runners share it without knowing about each other.
const tails = new WeakMap<EventLog, ProjectionTail>();

export const createProjectionRunner = (log: EventLog, spec: ProjectionSpec): ProjectionRunner => {
  let tail = tails.get(log);
  if (tail === undefined) tails.set(log, (tail = createProjectionTail(log)));
  return tail.runner(spec);
};
