// A receiver's check of a delivery with the official `standardwebhooks` library, given the secret
// exactly as the API answered it, and nothing else.
import type { Webhook } from 'standardwebhooks';
import type { ReceivedRequest } from './receiver.js';
import { header } from './webhooks-dispatch.js';

/** The standard's three headers of a received request, as a receiver hands them to the library. */
export const standardHeaders = (request: ReceivedRequest): Record<string, string> => ({
  'webhook-id': header(request, 'webhook-id'),
  'webhook-timestamp': header(request, 'webhook-timestamp'),
  'webhook-signature': header(request, 'webhook-signature'),
});

/** What the library said of one request: the parsed payload, or its error message. */
export type Verdict = { readonly ok: true; readonly payload: unknown } | { readonly ok: false; readonly error: string };

export const verdictOf = (hook: Webhook, request: ReceivedRequest): Verdict => {
  try {
    return { ok: true, payload: hook.verify(request.body, standardHeaders(request)) };
  } catch (error) {
    return { ok: false, error: (error as Error).message };
  }
};
