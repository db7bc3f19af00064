// A long-poll iterator over GET /api/v1/updates: yields events in log order and keeps the offset (the
// one to resume from after the last event yielded), waits as told by 429 and 503 Retry-After, backs
// off exponentially on other 5xx and network errors, and throws on any other answer (a bad key, a
// bad query), which retrying would not fix.
import { toEvent, type Event, type OtherEvent } from './event.js';
import type { EventType } from './events.js';

export type FeedItem = (Event | OtherEvent) & { readonly offset: number };

export interface UpdatesOptions {
  /** The service's base address, e.g. http://localhost:8080. */
  readonly url: string;
  readonly apiKey: string;
  /** Microseconds, inclusive: 0 for the whole history (default), Date.now() * 1000 for from now on. */
  readonly offset?: number;
  readonly types?: readonly EventType[];
  /** Seconds the server holds a poll open when nothing is there (0..60, default 30). */
  readonly timeoutSeconds?: number;
  /** The first backoff after a failure (default 1000 ms), doubled up to maxDelayMs (default 30000). */
  readonly initialDelayMs?: number;
  readonly maxDelayMs?: number;
  readonly signal?: AbortSignal;
}

export class UpdatesError extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
  ) {
    super(`GET /api/v1/updates answered ${status}: ${body}`);
    this.name = 'UpdatesError';
  }
}

const sleep = (ms: number, signal: AbortSignal | undefined): Promise<void> =>
  new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', stop);
      resolve();
    }, ms);
    const stop = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', stop, { once: true });
  });

/** Retry-After in milliseconds: delay-seconds or an HTTP date; undefined when absent or unreadable. */
export const retryAfterMs = (value: string | null, now = Date.now()): number | undefined => {
  if (value === null || value.trim() === '') return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
};

export class Updates implements AsyncIterable<FeedItem> {
  /** Where the next poll starts: after the last event yielded. Store it to resume after a restart. */
  offset: number;

  constructor(private readonly options: UpdatesOptions) {
    this.offset = options.offset ?? 0;
  }

  private pageUrl(): URL {
    const url = new URL('/api/v1/updates', this.options.url);
    url.searchParams.set('offset', String(this.offset));
    url.searchParams.set('timeout', String(this.options.timeoutSeconds ?? 30));
    if (this.options.types !== undefined && this.options.types.length > 0) url.searchParams.set('types', this.options.types.join(','));
    return url;
  }

  /** One page of events, after as many retries as transient failures need. */
  private async page(): Promise<{ items: FeedItem[]; next_offset: number }> {
    const { initialDelayMs = 1000, maxDelayMs = 30_000, signal } = this.options;
    let delay = initialDelayMs;
    for (;;) {
      let response: Response | undefined;
      try {
        // A poll the server holds open answers within its timeout: one silent for 30 s more is lost.
        const lost = AbortSignal.timeout(((this.options.timeoutSeconds ?? 30) + 30) * 1000);
        response = await fetch(this.pageUrl(), {
          headers: { authorization: `Bearer ${this.options.apiKey}` },
          signal: signal === undefined ? lost : AbortSignal.any([signal, lost]),
        });
      } catch (error) {
        if (signal?.aborted) throw error;
      }
      if (response?.ok) return (await response.json()) as { items: FeedItem[]; next_offset: number };
      if (response !== undefined && response.status !== 429 && response.status < 500) throw new UpdatesError(response.status, await response.text());
      const told = response === undefined ? undefined : retryAfterMs(response.headers.get('retry-after'));
      await response?.body?.cancel();
      await sleep(Math.min(told ?? delay, maxDelayMs), signal);
      if (told === undefined) delay = Math.min(delay * 2, maxDelayMs);
    }
  }

  async *[Symbol.asyncIterator](): AsyncIterator<FeedItem> {
    for (;;) {
      const page = await this.page();
      for (const item of page.items) {
        const event = toEvent(item) as FeedItem;
        // Before the yield: a consumer that stops at this event never resumes the generator.
        this.offset = item.offset + 1;
        yield event;
      }
      this.offset = Math.max(this.offset, page.next_offset);
    }
  }
}

/** `for await (const event of updates({url, apiKey}))`: every event from the offset on, forever. */
export const updates = (options: UpdatesOptions): Updates => new Updates(options);
