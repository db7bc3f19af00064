// The listen loop: long-poll the feed from the starting offset, forward each event in order, print a
// line per event, and save the next offset after each one. A stop (the signal) lets the event in
// flight finish and be saved; an event whose target was down when the stop came is not saved, so the
// next run sends it again.
import type { FeedItem } from '../../updates/feed-item.js';
import type { AttemptOutcome } from '../../webhooks/sender.js';
import { createForwarder, type Forwarded } from './forwarder.js';
import type { ListenOptions } from './options.js';
import { readState, writeState } from './state.js';
import { nextPage } from './updates-client.js';

export interface ListenOutput {
  /** One line per event, on stdout. */
  line(text: string): void;
  /** Start-up facts, retries and the stop, on stderr. */
  notice(text: string): void;
}

const clockTime = (date: Date): string => date.toISOString().slice(11, 23);

const answer = (outcome: AttemptOutcome): string => (outcome.statusCode === null ? (outcome.error ?? 'no answer') : String(outcome.statusCode));

export const eventLine = (item: FeedItem, forwarded: Forwarded, at: Date): string =>
  `${clockTime(at)}  ${item.type.padEnd(31)} ${item.id}  <-- [${answer(forwarded.outcome)}] ${forwarded.outcome.latencyMs} ms` +
  (forwarded.attempt > 1 ? ` (attempt ${forwarded.attempt})` : '');

/** The offset to start at: the state file's when it exists, else --from (now is the service's "now" in µs). */
export const startOffset = (options: ListenOptions, now: () => number): number => {
  const saved = options.stateFile === undefined ? null : readState(options.stateFile);
  if (saved !== null) return saved;
  return options.from.kind === 'now' ? now() : options.from.offset;
};

/** Runs until `signal` aborts (resolves) or the API refuses the key or a parameter (rejects). */
export const listen = async (options: ListenOptions, secret: string, out: ListenOutput, signal: AbortSignal): Promise<void> => {
  let offset = startOffset(options, () => Date.now() * 1000);
  const save = (next: number) => {
    offset = next;
    if (options.stateFile !== undefined) writeState(options.stateFile, next);
  };
  // Saved at once, so a "now" start that is stopped before any event resumes from this moment.
  save(offset);
  out.notice(`Forwarding events from offset ${offset} to ${options.forwardTo}`);
  const forwarder = createForwarder(options.forwardTo, secret);
  const retry = (outcome: AttemptOutcome, attempt: number, waitMs: number) =>
    out.notice(`${options.forwardTo} did not answer attempt ${attempt} (${outcome.error}); retrying in ${(waitMs / 1000).toFixed(1)} s`);
  try {
    while (!signal.aborted) {
      const page = await nextPage({ url: options.url, key: options.key, offset, ...(options.types === undefined ? {} : { types: options.types }) }, signal, out.notice);
      if (page === null) break;
      for (const item of page.items) {
        if (signal.aborted) break;
        const forwarded = await forwarder.forward(item, signal, retry);
        if (forwarded === null) break;
        out.line(eventLine(item, forwarded, new Date()));
        save(item.offset + 1);
      }
      if (!signal.aborted && page.items.length === 0) save(page.next_offset);
    }
  } finally {
    await forwarder.close();
  }
  out.notice(`Stopped; the next event is at offset ${offset}${options.stateFile === undefined ? '' : ` (saved in ${options.stateFile})`}`);
};
