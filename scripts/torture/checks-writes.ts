// Writes against what the service shows: each acknowledged write is in the read models and its event
// in /updates exactly once (matched by the id its answer returned, and by the marker it carried, so a
// retried keyed request that made a second ticket shows); an unknown one at most once; a refused one
// not at all. Closes and reopens carry no marker: per ticket, their events must number at least the
// acknowledged ones and at most all that may have run.
import { send, type Answer } from './http.js';
import type { FeedItem } from './feed.js';
import { note, type Findings } from './findings.js';
import type { Workspace, Write, WriteKind } from './ledger.js';

/** The public event a write makes, and the data fields that hold its id and its marker. */
const EFFECTS: Partial<Record<WriteKind, { readonly type: string; readonly idField?: string; readonly markerField: string }>> = {
  ticket: { type: 'ticket.created', idField: 'ticket_id', markerField: 'subject' },
  message: { type: 'message.created', idField: 'id', markerField: 'content' },
  inbound: { type: 'message.created', idField: 'id', markerField: 'content' },
  rate: { type: 'ticket.rated', markerField: 'comment' },
  identify: { type: 'contact.created', idField: 'id', markerField: 'full_name' },
};
const COUNTED: Partial<Record<WriteKind, string>> = { close: 'ticket.closed', reopen: 'ticket.reopened' };

const POOL = 8;

type Index = Map<string, number>;
const keyOf = (type: string, field: string, value: unknown) => `${type}\u0000${field}\u0000${String(value)}`;

const indexFeed = (feed: readonly FeedItem[]): Index => {
  const index: Index = new Map();
  for (const item of feed) {
    for (const [field, value] of Object.entries(item.data)) {
      if (typeof value !== 'string') continue;
      const key = keyOf(item.type, field, value);
      index.set(key, (index.get(key) ?? 0) + 1);
    }
  }
  return index;
};

const inPool = async <T>(items: readonly T[], work: (item: T) => Promise<void>): Promise<void> => {
  const queue = [...items];
  await Promise.all(Array.from({ length: POOL }, async () => {
    for (let item = queue.shift(); item !== undefined; item = queue.shift()) await work(item);
  }));
};

/** A GET the service answers 200 or 404 (it may be starting: 503 is asked again). */
const reader = (baseUrl: () => string) => {
  const cache = new Map<string, Promise<Answer>>();
  const get = async (ws: Workspace, path: string): Promise<Answer> => {
    for (;;) {
      const sent = await send(baseUrl(), { method: 'GET', path, token: ws.apiKey });
      if (sent.kind === 'answer' && (sent.answer.status === 200 || sent.answer.status === 404)) return sent.answer;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };
  return (ws: Workspace, path: string): Promise<Answer> => {
    let answer = cache.get(path);
    if (answer === undefined) cache.set(path, (answer = get(ws, path)));
    return answer;
  };
};

export interface WriteCheckOptions {
  /** Only writes decided before this (Date.now()) must be in the feeds: the feeds were read after it. */
  readonly decidedBefore: number;
  /** A pass while the traffic runs: only writes not verified by an earlier pass, and nothing a later write may change. */
  readonly incremental: boolean;
}

const settled = (w: Write, before: number) => (w.outcome === 'acked' || w.outcome === 'answer_lost') && w.decidedAt !== null && w.decidedAt < before;

const checkFeedEffects = (writes: readonly Write[], index: Index, o: WriteCheckOptions, f: Findings): void => {
  for (const w of writes) {
    const effect = EFFECTS[w.kind];
    if (effect === undefined) continue;
    const byMarker = index.get(keyOf(effect.type, effect.markerField, w.marker)) ?? 0;
    if (byMarker > 1) note(f, 'duplicates_created', w.marker, `${w.kind} ${w.marker} (${w.keyed ? 'keyed' : 'no key'}, ${w.outcome}): ${byMarker} × ${effect.type}`);
    if (w.outcome === 'refused' && byMarker > 0) note(f, 'phantom_writes', w.marker, `${w.kind} ${w.marker}: refused (${w.how}), yet ${effect.type} is there`);
    if (!settled(w, o.decidedBefore)) continue;
    if (byMarker === 0) note(f, 'lost_writes', w.marker, `${w.kind} ${w.marker} (${w.outcome}, ${w.keyed ? 'keyed' : 'no key'}): no ${effect.type} in /updates`);
    const byId = effect.idField === undefined || w.outcome !== 'acked' ? 1 : index.get(keyOf(effect.type, effect.idField, w.id)) ?? 0;
    if (byId === 0 && byMarker > 0) note(f, 'lost_writes', w.marker, `${w.kind} ${w.marker}: its ${effect.type} names another id than the answer's ${w.id}`);
    if (byId > 1) note(f, 'duplicates_created', w.marker, `${w.kind} ${w.marker}: ${byId} × ${effect.type} for ${w.id}`);
  }
};

const checkCounts = (writes: readonly Write[], index: Index, o: WriteCheckOptions, f: Findings): void => {
  const groups = new Map<string, Write[]>();
  for (const w of writes) {
    if (COUNTED[w.kind] === undefined || w.ticketId === null) continue;
    const key = `${w.kind}/${w.ticketId}`;
    groups.set(key, [...(groups.get(key) ?? []), w]);
  }
  for (const group of groups.values()) {
    const { kind, ticketId } = group[0]!;
    const type = COUNTED[kind]!;
    const n = index.get(keyOf(type, 'ticket_id', ticketId)) ?? 0;
    const least = group.filter((w) => settled(w, o.decidedBefore)).length;
    const most = group.filter((w) => w.outcome !== 'refused').length;
    if (n < least) note(f, 'lost_writes', `${kind}/${ticketId}`, `ticket ${ticketId}: ${least} ${kind} acknowledged, ${n} × ${type} in /updates`);
    if (n > most) note(f, 'phantom_writes', `${kind}/${ticketId}`, `ticket ${ticketId}: ${most} ${kind} that may have run, ${n} × ${type} in /updates`);
  }
};

const checkReadModels = async (writes: readonly Write[], baseUrl: () => string, o: WriteCheckOptions, f: Findings): Promise<void> => {
  const get = reader(baseUrl);
  const due = (w: Write) => w.outcome === 'acked' && !(o.incremental && w.verified);
  const lost = (w: Write, what: string) => note(f, 'lost_writes', w.marker, `${w.kind} ${w.marker} (${w.keyed ? 'keyed' : 'no key'}): acknowledged, ${what}`);

  // The last PATCH of a ticket that may have run, when it was acknowledged, set the subject. Only
  // once the traffic has stopped: meanwhile a client may PATCH again between this list and the read.
  const lastPatch = new Map<string, Write>();
  for (const w of writes) if (w.kind === 'patch' && w.outcome !== 'refused' && w.ticketId !== null) lastPatch.set(w.ticketId, w);
  const refusedPatches = new Map(writes.filter((w) => w.kind === 'patch' && w.outcome === 'refused').map((w) => [w.marker, w]));

  const checks = writes.filter(due).map((w) => async () => {
    const ws = w.workspace;
    if (w.kind === 'ticket' && (await get(ws, `/api/v1/tickets/${w.id}`)).status !== 200) lost(w, `GET /tickets/${w.id} is 404`);
    if (w.kind === 'message' || w.kind === 'inbound') {
      const page = await get(ws, `/api/v1/tickets/${w.ticketId}/messages?page_size=100`);
      if (!(page.body.items as { id: string }[] | undefined)?.some((m) => m.id === w.id)) lost(w, `message ${w.id} not in GET /tickets/${w.ticketId}/messages`);
    }
    if (w.kind === 'contact' || w.kind === 'identify') {
      const contact = await get(ws, `/api/v1/contacts/${w.id}`);
      if (contact.status !== 200 || contact.body.full_name !== w.marker) lost(w, `GET /contacts/${w.id} is ${contact.status} ${JSON.stringify(contact.body)}`);
    }
    if (w.kind === 'patch' && !o.incremental && lastPatch.get(w.ticketId ?? '') === w) {
      const { subject } = (await get(ws, `/api/v1/tickets/${w.ticketId}`)).body;
      const refused = refusedPatches.get(String(subject));
      if (refused !== undefined) note(f, 'phantom_writes', refused.marker, `patch ${refused.marker}: refused (${refused.how}), yet the ticket's subject is its own`);
      else if (subject !== w.marker) lost(w, `the ticket's subject is ${JSON.stringify(subject)}`);
    }
    w.verified = true;
  });
  await inPool(checks, (check) => check());
};

/** Checks the ledger's writes against the feeds (read after `decidedBefore`) and the read models. */
export const checkWrites = async (
  writes: readonly Write[],
  feeds: ReadonlyMap<Workspace, readonly FeedItem[]>,
  baseUrl: () => string,
  o: WriteCheckOptions,
  f: Findings,
): Promise<void> => {
  for (const [ws, feed] of feeds) {
    const mine = writes.filter((w) => w.workspace === ws);
    const index = indexFeed(feed);
    checkFeedEffects(mine, index, o, f);
    checkCounts(mine, index, o, f);
  }
  await checkReadModels(writes, baseUrl, o, f);
};
