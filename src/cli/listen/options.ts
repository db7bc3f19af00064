// The listen command's options: read from argv and the environment, checked before anything runs.
import type { PublicEventType } from '../../domain/event-types.js';
import { parseCommandLine, parseHttpUrl, parseTypes, UsageError } from '../args.js';

/** Where the stream starts when no state file says otherwise. */
export type From = { readonly kind: 'now' } | { readonly kind: 'offset'; readonly offset: number };

export interface ListenOptions {
  /** The service's base URL, without /api/v1. */
  readonly url: string;
  readonly key: string;
  readonly forwardTo: string;
  readonly types?: readonly PublicEventType[];
  readonly from: From;
  readonly stateFile?: string;
  /** The signing secret; a fresh one when not given. */
  readonly secret?: string;
}

export const KEY_ENV = 'SUPPORT_PLATFORM_API_KEY';
export const URL_ENV = 'SUPPORT_PLATFORM_URL';
const DEFAULT_URL = 'http://localhost:8080';

export const LISTEN_USAGE = `Usage: support-platform listen --forward-to URL [options]
       npm run listen -- --forward-to URL [options]

Long-polls GET /api/v1/updates and forwards each event to a local URL as a webhook delivery would
arrive: the same body bytes, Content-Type, X-Webhook-Signature (HMAC-SHA256 with a local secret),
X-Webhook-Event, X-Webhook-Id, X-Webhook-Attempt and the Standard Webhooks headers (webhook-id,
webhook-timestamp, webhook-signature). One line per event on stdout.

Options:
  --forward-to URL   where to POST each event, e.g. http://localhost:3000/webhooks (required)
  --url URL          the service's base URL (default $${URL_ENV}, else ${DEFAULT_URL})
  --key KEY          the workspace's API key (default $${KEY_ENV})
  --types A,B        only these event types (default: every type)
  --from WHERE       now (default), 0 (the whole history) or an offset in microseconds
  --state FILE       keep the next offset in FILE, written after each forwarded event; when FILE
                     exists it wins over --from, so a restart skips and repeats nothing
  --secret SECRET    sign with this secret instead of a fresh one printed at start
  -h, --help         this text

A local target that does not answer (refused, reset, timed out) gets the same event again with a
growing pause (0.5 s doubling to 10 s), so order is kept; any HTTP answer is final and printed.
429 from the API waits its Retry-After; 5xx and network errors back off 1 s doubling to 30 s.
Ctrl-C lets the event in flight finish, saves the state and exits 0.`;

const parseFrom = (raw: string): From => {
  if (raw === 'now') return { kind: 'now' };
  const n = /^\d+$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isSafeInteger(n)) throw new UsageError(`--from must be now, 0 or an offset in microseconds, not "${raw}"`);
  return { kind: 'offset', offset: n };
};

/** The options, or null when --help was asked; a UsageError for anything wrong or missing. */
export const parseListenOptions = (argv: readonly string[], env: NodeJS.ProcessEnv): ListenOptions | null => {
  const values = parseCommandLine({
    args: [...argv],
    options: {
      url: { type: 'string' },
      key: { type: 'string' },
      'forward-to': { type: 'string' },
      types: { type: 'string' },
      from: { type: 'string' },
      state: { type: 'string' },
      secret: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help === true) return null;
  const key = values.key ?? env[KEY_ENV];
  if (key === undefined || key === '') throw new UsageError(`give the API key with --key or ${KEY_ENV}`);
  if (values['forward-to'] === undefined) throw new UsageError('--forward-to is required (the local URL to POST events to)');
  if (values.secret === '') throw new UsageError('--secret must not be empty');
  if (values.state === '') throw new UsageError('--state must name a file');
  const types = parseTypes(values.types);
  return {
    url: parseHttpUrl('--url', values.url ?? env[URL_ENV] ?? DEFAULT_URL).replace(/\/+$/, ''),
    key,
    forwardTo: parseHttpUrl('--forward-to', values['forward-to']),
    from: parseFrom(values.from ?? 'now'),
    ...(types === undefined ? {} : { types }),
    ...(values.state === undefined ? {} : { stateFile: values.state }),
    ...(values.secret === undefined ? {} : { secret: values.secret }),
  };
};
