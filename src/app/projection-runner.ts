// Keeps read models up to date by tailing the log from their checkpoints (never from "after commit"
// hooks, which a crash loses). waitFor(position) gives read-your-writes: a command handler awaits
// the position of its last appended event before answering.
//
// All runners of one log share ONE subscription (a ProjectionTail): each event is read and parsed
// once and handed to every projection, instead of once per projection. A runner that starts behind
// the tail (its checkpoint is older) catches up with reads of its own, then joins the tail. Where the
// log tells the positions it looked through (reportsScanned), the tail reads only the types its
// runners apply: the rest (delivery records are most of a busy log) is skipped unread, and runners
// still move past it. A runner joining with a type the tail does not read starts it again, from where
// it is, with that type too.
//
// An apply that throws ProjectionReset (a shared store that lost its data or cannot be reached) does
// not stop its projection: the runner reads the store's checkpoint again, retrying until it can, and
// catches up from there. Any other failure stops that projection alone, and its waiters hear why.
//
// Streams can be deleted (a webhook subscription and its delivery history): their positions are then
// never read again. A catch-up ends at the head as reading sees it, and a waiter for a position that
// no longer exists waits for the last one that does, so no deletion leaves anyone waiting for good.
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { EventLog, LogSubscription, RecordedEvent } from '../log/event-log.js';

/** Thrown by a projection's apply: start again from its checkpoint (the store lost data, or is unreachable). */
export class ProjectionReset extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ProjectionReset';
  }
}

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
  /** Resolves once every event up to `position` is applied (or, if they were deleted, every one before them); rejects if the projection stops on a failure. */
  waitFor(position: number): Promise<void>;
  /** Reads the store's checkpoint again and goes on from there (a shared store back after an outage may have lost data). */
  resume(reason: string): void;
  /** True from start or a resume until the projection has caught up with the log (false once stopped or failed). */
  catchingUp(): boolean;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export interface ProjectionTail {
  /** A runner fed by this tail. */
  runner(spec: ProjectionSpec): ProjectionRunner;
}

const CATCH_UP_PAGE = 1000;
const RESET_RETRY_MS = 1000;
/** Applies a member may have pending before the log reader waits for it. */
const MAX_IN_FLIGHT = 2000;
/** How long a waiter waits before the log is asked whether its position still exists. */
const GONE_CHECK_MS = 1000;

interface Waiter {
  position: number;
  readonly resolve: () => void;
  readonly reject: (error: unknown) => void;
}

/** Position bookkeeping and waitFor of one projection. */
const progress = () => {
  let applied = 0;
  let waiters: Waiter[] = [];
  // The lowest position waited for: most events resolve nobody, and then cost one comparison.
  let lowest = Infinity;
  let failure: { readonly error: unknown } | null = null;
  const settle = () => {
    const ready = waiters.filter((w) => w.position <= applied);
    waiters = waiters.filter((w) => w.position > applied);
    lowest = waiters.reduce((min, w) => Math.min(min, w.position), Infinity);
    ready.forEach((w) => w.resolve());
  };
  return {
    applied: () => applied,
    waiting: () => waiters.length > 0,
    /** Moves to `position`, forwards or (a store reset) back; a store's checkpoint beyond a waiter settles it too. */
    advance(position: number) {
      applied = position;
      if (applied >= lowest) settle();
    },
    /** The log ends at `head` now: positions above it were deleted (new events come after them), so their waiters wait for `head`. */
    clampTo(head: number) {
      for (const w of waiters) w.position = Math.min(w.position, head);
      settle();
    },
    /** The projection stopped on a failure: its waiters, and later ones until a restart, hear why. */
    fail(error: unknown) {
      failure = { error };
      const failed = waiters;
      waiters = [];
      lowest = Infinity;
      failed.forEach((w) => w.reject(error));
    },
    restart() {
      failure = null;
    },
    waitFor(position: number): Promise<void> {
      if (position <= applied) return Promise.resolve();
      if (failure !== null) return Promise.reject(failure.error);
      lowest = Math.min(lowest, position);
      return new Promise<void>((resolve, reject) => waiters.push({ position, resolve, reject }));
    },
  };
};

interface Member {
  readonly spec: ProjectionSpec;
  readonly types: ReadonlySet<string>;
  readonly progress: ReturnType<typeof progress>;
  /** Fed by the tail (else still catching up, or stopped). */
  live: boolean;
  /** Counts (re)starts: a catch-up of an older one gives way. */
  run: number;
  /** Set while a reset is being recovered from: one warning per outage. */
  resetting: boolean;
  /** Asynchronous applies not settled yet (a store writing in batches takes the next ones meanwhile). */
  inFlight: number;
  /** Position of the last event handed to this member, applied or not. */
  handed: number;
  /** The newest apply in flight, settled (never rejected) when it is done. */
  last: Promise<void> | null;
}

export const createProjectionTail = (log: EventLog): ProjectionTail => {
  const members = new Set<Member>();
  // Position of the event the tail is delivering or last delivered: set BEFORE it is handed out,
  // so a member that has applied up to `head` cannot miss an event by joining mid-delivery.
  let head = 0;
  let tail: Promise<LogSubscription> | null = null;
  // A stopped tail may still be finishing an event while a new one starts: only the newest delivers.
  let generation = 0;
  /** The types the tail (started or starting) reads; null: every type. */
  let covered: ReadonlySet<string> | null = null;

  const fail = (member: Member, error: unknown) => {
    members.delete(member);
    member.live = false;
    console.error(`projection ${member.spec.name} stopped:`, error);
    member.progress.fail(new Error(`projection ${member.spec.name} stopped: ${(error as Error).message ?? String(error)}`, { cause: error }));
  };

  // Waiters still waiting a while after they asked: one look at the log's head settles those whose
  // positions were deleted before this process read them.
  let goneCheck: NodeJS.Timeout | null = null;
  const checkGone = async () => {
    const waiting = [...members].filter((member) => member.progress.waiting());
    if (waiting.length === 0) return;
    try {
      const end = await log.headPosition();
      for (const member of waiting) member.progress.clampTo(end);
    } catch {
      // The log is unreachable: the next look will tell.
    }
    if ([...members].some((member) => member.progress.waiting())) scheduleGoneCheck();
  };
  const scheduleGoneCheck = () => {
    goneCheck ??= setTimeout(() => {
      goneCheck = null;
      void checkGone();
    }, GONE_CHECK_MS).unref();
  };

  /** From the store's checkpoint (retried until it can be read) through the log, then live. */
  const resume = async (member: Member): Promise<void> => {
    const run = ++member.run;
    member.live = false;
    for (;;) {
      try {
        member.progress.advance(await member.spec.checkpoint());
        break;
      } catch (error) {
        if (!member.resetting) throw error;
        await new Promise((resolve) => setTimeout(resolve, RESET_RETRY_MS));
        if (!members.has(member) || member.run !== run) return;
      }
    }
    void catchUp(member, run).catch((error: unknown) => failed(member, error));
  };

  const failed = (member: Member, error: unknown): void => {
    if (!(error instanceof ProjectionReset)) return fail(member, error);
    if (!members.has(member)) return;
    if (!member.resetting) console.warn(`projection ${member.spec.name}: ${error.message}; resuming from its checkpoint`);
    member.resetting = true;
    void resume(member).catch((e: unknown) => fail(member, e));
  };

  /**
   * Hands one event to one member. An asynchronous apply is not waited for: the store settles its
   * applies in order, and progress moves as they settle, never past one still in flight. A promise
   * comes back only when MAX_IN_FLIGHT applies are pending (back-pressure on the log reader).
   */
  const feed = (member: Member, event: RecordedEvent): Promise<void> | undefined => {
    member.handed = event.position;
    let applied: Promise<void> | void = undefined;
    if (member.types.has(event.type)) {
      try {
        applied = member.spec.apply(event);
      } catch (error) {
        failed(member, error);
        return undefined;
      }
    }
    if (applied === undefined) {
      if (member.inFlight === 0) member.progress.advance(event.position);
      return undefined;
    }
    const run = member.run;
    member.inFlight += 1;
    const settled = applied.then(
      () => {
        member.inFlight -= 1;
        if (member.run !== run) return;
        member.resetting = false;
        // The last one in flight also covers the events handed over after it without an apply.
        member.progress.advance(member.inFlight === 0 ? member.handed : event.position);
      },
      (error: unknown) => {
        member.inFlight -= 1;
        if (member.run === run) failed(member, error);
      },
    );
    member.last = settled;
    return member.inFlight >= MAX_IN_FLIGHT ? settled : undefined;
  };

  const deliver = (event: RecordedEvent): Promise<void> | undefined => {
    head = event.position;
    let pending: Promise<void>[] | undefined;
    for (const member of members) {
      if (!member.live || event.position <= member.progress.applied()) continue;
      const applying = feed(member, event);
      if (applying !== undefined) (pending ??= []).push(applying);
    }
    // Members apply concurrently; the next event waits only for members at their in-flight limit.
    return pending === undefined ? undefined : Promise.all(pending).then(() => undefined);
  };

  /**
   * The log looked through `position` past events no runner applies: each live runner moves there as
   * it would past such an event handed to it (at once, or when its applies in flight settle).
   */
  const passed = (position: number): void => {
    head = Math.max(head, position);
    for (const member of members) {
      if (!member.live || position <= member.progress.applied()) continue;
      member.handed = position;
      if (member.inFlight === 0) member.progress.advance(position);
    }
  };

  /** From `after` (default: the head now), reading the types of every runner there is when called. */
  const startTail = async (after?: number): Promise<LogSubscription> => {
    const mine = ++generation;
    const types = new Set([...members].flatMap((member) => [...member.types]));
    const filtered = log.reportsScanned === true && types.size > 0;
    covered = filtered ? types : null;
    head = after ?? (await log.headPosition());
    const subscription = log.subscribe(
      { after: head, ...(filtered ? { types: [...types], scanned: (position: number) => (mine === generation ? passed(position) : undefined) } : {}) },
      (event) => (mine === generation ? deliver(event) : undefined),
    );
    subscription.done.catch((error: unknown) => console.error('projection log tail stopped:', error));
    return subscription;
  };

  /**
   * The tail, reading the member's types: started, or started again where it is (everything up to
   * `head` was handed out) with them too. The old one delivers nothing from the moment it is replaced.
   */
  const tailFor = (member: Member): Promise<LogSubscription> => {
    if (tail === null) return (tail = startTail());
    const reads = covered;
    if (reads === null || [...member.types].every((type) => reads.has(type))) return tail;
    const replaced = tail;
    generation += 1;
    covered = null;
    tail = (async () => {
      await (await replaced).stop();
      return startTail(head);
    })();
    return tail;
  };

  /**
   * Reads the log from the member's checkpoint until it has reached the tail, then goes live. It
   * ends at the head as reading sees it: an empty page means nothing exists up to the head noted
   * before the read (a deleted tail). Each page yields to the event loop, and a page that does not
   * move forwards is an error, never a spin.
   */
  const catchUp = async (member: Member, run: number) => {
    await tailFor(member);
    while (members.has(member) && member.run === run) {
      // Checked right after an await and before the next: nothing can be delivered in between.
      const from = member.progress.applied();
      if (from >= head) {
        member.live = true;
        return;
      }
      const reached = head;
      // Only the member's types: the log skips the rest (delivery records are most of a busy log) unparsed.
      const events = await log.readAll({ after: from, limit: CATCH_UP_PAGE, types: member.spec.types });
      if (!members.has(member) || member.run !== run) return;
      if (events.length === 0) {
        member.progress.advance(reached);
        continue;
      }
      const last = (events.at(-1) as RecordedEvent).position;
      if (last <= from) throw new Error(`projection ${member.spec.name}: the log read after position ${from} returned nothing beyond it (up to ${last})`);
      for (const event of events) {
        if (!members.has(member) || member.run !== run) return;
        await feed(member, event);
      }
      // The page's applies settle before progress is read again; timers and I/O run in between.
      await member.last;
      await nextTurn();
    }
  };

  return {
    runner(spec) {
      const member: Member = { spec, types: new Set(spec.types), progress: progress(), live: false, run: 0, resetting: false, inFlight: 0, handed: 0, last: null };
      return {
        name: spec.name,
        position: () => member.progress.applied(),
        waitFor: (position) => {
          const waiting = member.progress.waitFor(position);
          if (position > member.progress.applied()) scheduleGoneCheck();
          return waiting;
        },
        resume: (reason) => failed(member, new ProjectionReset(reason)),
        catchingUp: () => members.has(member) && !member.live,
        async start() {
          member.progress.restart();
          members.add(member);
          await resume(member).catch((error: unknown) => {
            members.delete(member);
            throw error;
          });
        },
        async stop() {
          members.delete(member);
          member.live = false;
          if (members.size > 0 || tail === null) return;
          if (goneCheck !== null) clearTimeout(goneCheck);
          goneCheck = null;
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
