// Long polls GET /api/v1/updates as the contract's retry guidance says: 429 waits its Retry-After,
// 5xx and network errors back off (1 s doubling to 30 s), any other error status stops the command
// (a wrong key or a bad parameter does not heal by retrying).
import type { FeedItem } from '../../updates/feed-item.js';
import { doubled, pause } from './pause.js';

export interface UpdatesPage {
  readonly items: readonly FeedItem[];
  readonly next_offset: number;
}

export interface UpdatesQuery {
  readonly url: string;
  readonly key: string;
  readonly offset: number;
  readonly types?: readonly string[];
}

/** The API refused the request for a reason retrying cannot fix. */
export class UpdatesRefused extends Error {
  constructor(readonly status: number, body: string) {
    super(`GET /api/v1/updates answered ${status}: ${body}`);
    this.name = 'UpdatesRefused';
  }
}

const WAIT_SECONDS = 30;
const FIRST_BACKOFF_MS = 1000;
const MAX_BACKOFF_MS = 30_000;

const retryAfterMs = (header: string | null): number => {
  const seconds = Number(header);
  return Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : FIRST_BACKOFF_MS;
};

/**
 * The next page at `offset` (waiting up to 30 s for one), or null when `signal` stopped it.
 * `notice` hears each retry, with the reason and the pause.
 */
export const nextPage = async (query: UpdatesQuery, signal: AbortSignal, notice: (message: string) => void): Promise<UpdatesPage | null> => {
  const params = new URLSearchParams({ offset: String(query.offset), timeout: String(WAIT_SECONDS), limit: '100' });
  if (query.types !== undefined) params.set('types', query.types.join(','));
  let backoff: number | null = null;
  for (;;) {
    let wait: number;
    let reason: string;
    try {
      const response = await fetch(`${query.url}/api/v1/updates?${params}`, { headers: { authorization: `Bearer ${query.key}` }, signal });
      if (response.status === 200) return (await response.json()) as UpdatesPage;
      const body = await response.text();
      if (response.status === 429) [wait, reason] = [retryAfterMs(response.headers.get('retry-after')), 'rate limited (429)'];
      else if (response.status >= 500) [wait, reason] = [(backoff = doubled(backoff, FIRST_BACKOFF_MS, MAX_BACKOFF_MS)), `HTTP ${response.status}`];
      else throw new UpdatesRefused(response.status, body);
    } catch (error) {
      if (signal.aborted) return null;
      if (error instanceof UpdatesRefused) throw error;
      // fetch says only "fetch failed"; the cause has the code (ECONNREFUSED, ENOTFOUND, …).
      const { message, cause } = error as Error & { cause?: { code?: string } };
      [wait, reason] = [(backoff = doubled(backoff, FIRST_BACKOFF_MS, MAX_BACKOFF_MS)), `unreachable (${cause?.code ?? message})`];
    }
    notice(`GET /api/v1/updates: ${reason}; retrying in ${(wait / 1000).toFixed(1)} s`);
    if (!(await pause(wait, signal))) return null;
  }
};
