// The feed itself: offsets strictly increase and ids are unique in each read; across restarts every
// event served before is served again at its offset, and new events come after all of them; a long
// poller never passed over an event that the feed holds behind its cursor.
import type { FeedItem } from './feed.js';
import { note, type Findings } from './findings.js';
import type { Poller } from './pollers.js';

export const checkOrder = (where: string, items: readonly FeedItem[], f: Findings): void => {
  const ids = new Set<string>();
  items.forEach((item, i) => {
    const before = items[i - 1];
    if (before !== undefined && item.offset <= before.offset) note(f, 'offsets_out_of_order', item.id, `${where}: offset ${item.offset} (${item.id}) after ${before.offset}`);
    if (ids.has(item.id)) note(f, 'offsets_out_of_order', item.id, `${where}: event ${item.id} served twice`);
    ids.add(item.id);
  });
};

/** `earlier` was read before a restart, `later` after it. */
export const checkStable = (where: string, earlier: readonly FeedItem[], later: readonly FeedItem[], f: Findings): void => {
  const offsets = new Map(later.map((item) => [item.id, item.offset]));
  for (const item of earlier) {
    const now = offsets.get(item.id);
    if (now === undefined) note(f, 'lost_events', item.id, `${where}: ${item.type} ${item.id} (offset ${item.offset}) is gone`);
    else if (now !== item.offset) note(f, 'offsets_out_of_order', item.id, `${where}: ${item.id} moved from offset ${item.offset} to ${now}`);
  }
  const known = new Set(earlier.map((item) => item.id));
  const last = earlier.at(-1)?.offset ?? -1;
  for (const item of later) {
    if (!known.has(item.id) && item.offset <= last) note(f, 'offsets_out_of_order', item.id, `${where}: ${item.type} ${item.id} appeared at offset ${item.offset}, behind ${last} already served`);
  }
};

export const checkPoller = (p: Poller, feed: readonly FeedItem[], f: Findings): void => {
  for (const d of p.disorder) note(f, 'offsets_out_of_order', d, d);
  for (const item of feed) {
    if (item.offset >= p.cursor || (p.types.length > 0 && !p.types.includes(item.type))) continue;
    if (!p.seen.has(item.id)) note(f, 'missed_by_long_polls', `${p.name}/${item.id}`, `${p.name}: ${item.type} ${item.id} at offset ${item.offset}, behind its cursor ${p.cursor}`);
  }
};
