// One /updates item: the envelope exactly as a webhook carries it, plus its feed offset. The export
// script writes the same objects, one per line.
import { toEnvelope, type Envelope } from '../domain/envelope.js';
import type { RecordedEvent } from '../log/event-log.js';

export type FeedItem = Envelope & { readonly offset: number };

export const feedItem = (record: RecordedEvent): FeedItem => ({ ...toEnvelope(record), offset: record.offset as number });
