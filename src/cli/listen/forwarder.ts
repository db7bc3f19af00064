// Forwards one /updates item to the local target exactly as the service's webhook sender delivers it:
// the same body bytes (envelopeBody of the item's envelope), the same sender and so the same headers
// and signature. A target that gives no HTTP answer (refused, reset, timed out) is down: the same
// event is sent again after a growing pause, so later events wait and order holds. Any HTTP answer is
// final, as `stripe listen` treats it: a handler's 500 is printed, not replayed forever.
import { deliveryIdOf } from '../../domain/delivery/ids.js';
import type { FeedItem } from '../../updates/feed-item.js';
import { itemEnvelope } from '../../updates/feed-item.js';
import { envelopeBody } from '../../webhooks/dispatch/bodies.js';
import { createSender, type AttemptOutcome } from '../../webhooks/sender.js';
import { doubled, pause } from './pause.js';

/** X-Webhook-Id is per event and subscription; listen is one subscription of its own. */
const LISTEN_SUBSCRIPTION = 'listen';
const TIMEOUT_MS = 10_000;
const FIRST_RETRY_MS = 500;
const MAX_RETRY_MS = 10_000;

export interface Forwarded {
  readonly outcome: AttemptOutcome;
  readonly attempt: number;
}

export interface Forwarder {
  /**
   * Sends the event until the target answers; null when `signal` stopped it while the target was
   * down (the event was not delivered). An attempt under way when the signal comes is finished.
   */
  forward(item: FeedItem, signal: AbortSignal, onRetry: (outcome: AttemptOutcome, attempt: number, waitMs: number) => void): Promise<Forwarded | null>;
  close(): Promise<void>;
}

export const createForwarder = (target: string, secret: string): Forwarder => {
  // The target is the developer's own machine: the delivery guard against internal addresses has
  // nothing to protect here, so every address is open.
  const sender = createSender({ timeoutMs: TIMEOUT_MS, allowedNetworks: ['0.0.0.0/0', '::/0'] });
  const secrets = { current: secret, previous: null };
  return {
    async forward(item, signal, onRetry) {
      const body = envelopeBody(itemEnvelope(item));
      const deliveryId = deliveryIdOf(item.id, LISTEN_SUBSCRIPTION);
      let wait: number | null = null;
      for (let attempt = 1; ; attempt += 1) {
        const outcome = await sender.send({ url: target, body, eventType: item.type, deliveryId, attempt, secrets });
        if (outcome.statusCode !== null) return { outcome, attempt };
        wait = doubled(wait, FIRST_RETRY_MS, MAX_RETRY_MS);
        onRetry(outcome, attempt, wait);
        if (!(await pause(wait, signal))) return null;
      }
    },
    close: () => sender.close(),
  };
};
