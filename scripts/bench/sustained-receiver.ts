// The sustained benchmark's webhook receiver, in its own process (an endpoint is another machine):
// answers every attempt at once, except the first attempt of one delivery in FAIL_ONE_IN, which it
// answers 500 so that the retry's punctuality can be measured. Per attempt it notes what the
// benchmark needs: the lag of a first attempt behind its event's commit (the envelope's `timestamp`),
// how late a retry came after its due time, and retries of attempts it had answered 200 (the sender
// took a success for a failure: a false timeout).
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { forkRole } from './forked.js';

const ROLE = 'SUSTAINED_BENCH_RECEIVER';
const FAIL_ONE_IN = 50;

/** Milliseconds since the epoch with sub-millisecond precision, comparable across processes. */
const nowMs = () => performance.timeOrigin + performance.now();

export interface ReceiverFigures {
  /** [event commit ms, first attempt arrival ms], one per delivery. */
  readonly firstAttempts: [number, number][];
  /** [due ms, arrival minus due ms] of each retry: due is the 500's answer time plus the first retry delay. */
  readonly retryLateMs: [number, number][];
  readonly falseFailures: number;
  readonly attempts: number;
  /** When each connection to it was accepted (ms): a burst's first attempts may open many at once. */
  readonly connectionsAt: number[];
}

/** `received`: how many first attempts of events committed from `since` (ms) arrived, a light question to ask while deliveries still come in. */
type ToReceiver = { readonly figures: true } | { readonly received: { readonly since: number } };
type FromReceiver = { readonly port: number } | { readonly figures: ReceiverFigures } | { readonly received: number };

const failsFirst = (deliveryId: string) => createHash('sha1').update(deliveryId).digest()[0]! % FAIL_ONE_IN === 0;

/** How long a first attempt answered 200 is remembered at least: a false timeout's retry comes seconds after it (the bench's timeout and retry delay). */
const REMEMBER_OK_MS = 60_000;

/**
 * Pairs of numbers in one growing Float64Array. A ten-minute run brings about two million first
 * attempts: kept as small arrays, with every delivery id in a map, they came to hundreds of MB of
 * heap for the receiver to collect, on the cores the service has, in the run that is to show the
 * service's lag not growing (RELIABILITY.md, "The bench's receiver through ten minutes").
 */
const pairs = () => {
  let data = new Float64Array(1 << 17);
  let length = 0;
  return {
    push(a: number, b: number): void {
      if (2 * length + 2 > data.length) {
        const grown = new Float64Array(2 * data.length);
        grown.set(data);
        data = grown;
      }
      data[2 * length] = a;
      data[2 * length + 1] = b;
      length++;
    },
    /** How many pairs have their first number at or over `least`. */
    countFrom(least: number): number {
      let n = 0;
      for (let i = 0; i < length; i++) if ((data[2 * i] as number) >= least) n++;
      return n;
    },
    toArray(): [number, number][] {
      return Array.from({ length }, (_, i) => [data[2 * i] as number, data[2 * i + 1] as number]);
    },
  };
};

const receiverProcess = async (retryDelayMs: number): Promise<void> => {
  const firstAttempts = pairs();
  const retryLateMs: [number, number][] = [];
  // Deliveries whose first attempt was answered 200, in two generations, the older dropped every
  // REMEMBER_OK_MS: each is remembered for one to two of them, and the sets do not grow through the run.
  let answeredOk = new Set<string>();
  let answeredOkBefore = new Set<string>();
  setInterval(() => {
    answeredOkBefore = answeredOk;
    answeredOk = new Set();
  }, REMEMBER_OK_MS).unref();
  /** When each first attempt answered 500 was answered, until its retry comes (one in FAIL_ONE_IN). */
  const failedAt = new Map<string, number>();
  const answered = (id: string) => answeredOk.has(id) || answeredOkBefore.has(id) || failedAt.has(id);
  let falseFailures = 0;
  let attempts = 0;
  const connectionsAt: number[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const arrived = nowMs();
      attempts++;
      const id = String(req.headers['x-webhook-id']);
      const attempt = Number(req.headers['x-webhook-attempt']);
      let status = 200;
      if (attempt === 1 && !answered(id)) {
        const committed = Date.parse(String((JSON.parse(Buffer.concat(chunks).toString('utf8')) as { timestamp: string }).timestamp));
        firstAttempts.push(committed, arrived);
        if (failsFirst(id)) {
          status = 500;
          failedAt.set(id, arrived);
        } else answeredOk.add(id);
      } else if (attempt === 2) {
        const failed = failedAt.get(id);
        if (answeredOk.has(id) || answeredOkBefore.has(id)) falseFailures++;
        else if (failed !== undefined) {
          failedAt.delete(id);
          retryLateMs.push([failed + retryDelayMs, arrived - (failed + retryDelayMs)]);
        }
      }
      res.writeHead(status).end();
    });
  });
  server.keepAliveTimeout = 65_000;
  server.on('connection', () => connectionsAt.push(nowMs()));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  process.on('message', (message: ToReceiver) => {
    if ('received' in message) process.send?.({ received: firstAttempts.countFrom(message.received.since) } satisfies FromReceiver);
    else process.send?.({ figures: { firstAttempts: firstAttempts.toArray(), retryLateMs, falseFailures, attempts, connectionsAt } } satisfies FromReceiver);
  });
  process.on('disconnect', () => process.exit(0));
  process.send?.({ port: (server.address() as AddressInfo).port } satisfies FromReceiver);
};

export interface SustainedReceiver {
  readonly url: string;
  /** The receiver's process. */
  readonly pid: number | undefined;
  figures(): Promise<ReceiverFigures>;
  /** How many first attempts of events committed from `sinceMs` arrived (the figures, serialized whole, pause the receiver longer). */
  received(sinceMs: number): Promise<number>;
  close(): Promise<void>;
}

export const startSustainedReceiver = async (retryDelayMs: number): Promise<SustainedReceiver> => {
  const { child, next, close } = forkRole<FromReceiver>(fileURLToPath(import.meta.url), ROLE, String(retryDelayMs));
  const { port } = await next('port');
  return {
    url: `http://127.0.0.1:${port}/hook`,
    pid: child.pid,
    figures: async () => {
      const reply = next('figures');
      child.send({ figures: true } satisfies ToReceiver);
      return (await reply).figures;
    },
    received: async (sinceMs) => {
      const reply = next('received');
      child.send({ received: { since: sinceMs } } satisfies ToReceiver);
      return (await reply).received;
    },
    close,
  };
};

if (process.env[ROLE] !== undefined) await receiverProcess(Number(process.env[ROLE]));
