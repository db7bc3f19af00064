// Ticket fold benchmark: the time to fold a ticket's stream (ticket.opened, then n message.created)
// with the aggregate's evolve, as a command does for a stream its state cache does not hold (the first
// command after a start, or after the stream left the cache), beside the ceiling: the same messages
// put in one mutable Map. Folding used to copy the ticket's messages at every message (5,000 took
// 5.3 s of the event loop); it should grow with n, not n². `npm run bench -- ticket-fold [--long]`.
import { evolveTicket, initialTicket, type MessageState } from '../../src/domain/ticket/state.js';
import type { RecordedEvent } from '../../src/log/event-log.js';

const SIZES = [1_000, 5_000, 20_000];
const LONG_SIZES = [...SIZES, 100_000];
const SECONDS_PER_SIZE = 1;

type Folded = Pick<RecordedEvent, 'type' | 'data'>;

const streamOf = (messages: number): Folded[] => [
  { type: 'ticket.opened', data: { workspace_id: 'w', contact_id: 'c', created_us: 1, status: 'new', subject: 'Damaged order', priority: 'normal' } },
  ...Array.from({ length: messages }, (_, i): Folded => ({
    type: 'message.created',
    data: { message_id: `${i.toString(16).padStart(12, '0')}${'7'.repeat(20)}`, sender_type: 'contact', sender_id: 'c', is_internal: false, content: 'My order arrived damaged.', media: [] },
  })),
];

/** Mean ms of `run` over about SECONDS_PER_SIZE. */
const timed = (run: () => unknown): number => {
  const started = performance.now();
  let runs = 0;
  while (performance.now() - started < SECONDS_PER_SIZE * 1000 || runs < 3) {
    run();
    runs += 1;
  }
  return (performance.now() - started) / runs;
};

/** What a fold needs at least: each message's state put in one mutable Map. */
const ceiling = (events: readonly Folded[]): Map<string, MessageState> => {
  const messages = new Map<string, MessageState>();
  for (const { data } of events.slice(1)) {
    messages.set(String(data['message_id']), { senderType: 'contact', senderId: String(data['sender_id']), isInternal: false, content: String(data['content']), hasMedia: false, reactions: {} });
  }
  return messages;
};

export async function run(opts: { long: boolean }): Promise<Record<string, number | string>> {
  const figures: Record<string, number | string> = { bench: 'ticket-fold' };
  for (const messages of opts.long ? LONG_SIZES : SIZES) {
    const events = streamOf(messages);
    const foldMs = timed(() => events.reduce((state, event) => evolveTicket(state, event as RecordedEvent), initialTicket));
    const ceilingMs = timed(() => ceiling(events));
    console.log(`${String(messages).padStart(7)} messages: fold ${foldMs.toFixed(2)} ms (${((foldMs / messages) * 1000).toFixed(2)} µs each), ceiling (one mutable Map) ${ceilingMs.toFixed(2)} ms: ${(ceilingMs / foldMs).toFixed(2)} of it`);
    figures[`fold_${messages}_ms`] = Number(foldMs.toFixed(2));
    figures[`ceiling_${messages}_ms`] = Number(ceilingMs.toFixed(2));
  }
  return figures;
}
