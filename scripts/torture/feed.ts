// Reading a workspace's /api/v1/updates: the whole feed (a snapshot, paged with timeout=0), or only
// where it ends now. Both wait for the service when it is down.
import { send } from './http.js';
import type { Workspace } from './ledger.js';

export interface FeedItem {
  readonly id: string;
  readonly type: string;
  readonly offset: number;
  readonly data: Record<string, unknown>;
  /** The item as served, offset included. */
  readonly raw: Record<string, unknown>;
}

const PAGE = 1000;
const WAIT_MS = 100;
const MAX_WAIT_MS = 120_000;

const page = async (baseUrl: () => string, ws: Workspace, offset: number): Promise<{ items: FeedItem[]; next: number }> => {
  const deadline = Date.now() + MAX_WAIT_MS;
  for (;;) {
    const sent = await send(baseUrl(), { method: 'GET', path: `/api/v1/updates?offset=${offset}&limit=${PAGE}&timeout=0`, token: ws.apiKey });
    if (sent.kind === 'answer' && sent.answer.status === 200) {
      const items = (sent.answer.body.items as Record<string, unknown>[]).map((raw) => ({
        id: String(raw['id']),
        type: String(raw['type']),
        offset: Number(raw['offset']),
        data: raw['data'] as Record<string, unknown>,
        raw,
      }));
      return { items, next: Number(sent.answer.body.next_offset) };
    }
    if (Date.now() > deadline) throw new Error(`/updates of ${ws.name} did not answer 200: ${JSON.stringify(sent)}`);
    await new Promise((resolve) => setTimeout(resolve, WAIT_MS));
  }
};

/** Every item of the workspace's feed, in the order served. */
export const readFeed = async (baseUrl: () => string, ws: Workspace): Promise<FeedItem[]> => {
  const all: FeedItem[] = [];
  for (let offset = 0; ; ) {
    const { items, next } = await page(baseUrl, ws, offset);
    all.push(...items);
    if (items.length < PAGE) return all;
    offset = next;
  }
};

/** The feed's next offset now, read from `from` (any offset at or before the end). */
export const feedEnd = async (baseUrl: () => string, ws: Workspace, from: number): Promise<number> => {
  for (let offset = from; ; ) {
    const { items, next } = await page(baseUrl, ws, offset);
    if (items.length < PAGE) return next;
    offset = next;
  }
};
