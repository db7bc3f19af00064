export { verifySignature, verifyStandard, standardKey, WebhookVerificationError, DEFAULT_TOLERANCE_SECONDS } from './signature.js';
export type { HeadersLike, StandardOptions, VerificationFailure } from './signature.js';
export { parseEvent, toEvent, receive, isEvent, EventParseError } from './event.js';
export type { Envelope, Event, OtherEvent } from './event.js';
export { updates, Updates, UpdatesError, retryAfterMs } from './updates.js';
export type { FeedItem, UpdatesOptions } from './updates.js';
export { EVENT_TYPES, EVENT_SCHEMAS } from './events.js';
export type * from './events.js';
