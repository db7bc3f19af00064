// Webhook subscriptions under torture and the receiver they deliver to. Each subscription's URL ends
// in its own label (/hook/<label>), so a delivery names its subscription even when the create's
// answer was lost. The receiver (its own thread, receiver-thread.ts) records when each delivery
// arrived, and fails the first attempt of one delivery in eight so retries run across the crashes
// too. Before a DELETE it fails every delivery of that subscription for a moment, so the DELETE meets
// retries to cancel.
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startWorker } from '../../src/shared/worker.js';
import type { ReceivedRequest } from '../../test/support/receiver.js';
import { send } from './http.js';
import { feedEnd } from './feed.js';
import type { Outcome, Workspace } from './ledger.js';
import type { Random } from './random.js';
import type { FromReceiver, ToReceiver } from './receiver-thread.js';
import { decide } from './writer.js';

export interface Subscription {
  readonly label: string;
  readonly workspace: Workspace;
  /** Event types (every event when empty). */
  readonly events: readonly string[];
  createOutcome: Outcome;
  id: string | null;
  /** Known when the create was answered (not when its answer was lost). */
  secret: string | null;
  /** Events at or after this offset were appended after the subscription existed (null: not known). */
  fromOffset: number | null;
  /** Date.now() when its first DELETE was sent. */
  deleteSentAt: number | null;
  /** Date.now() when a DELETE was answered 204 (or 404 after an earlier try of ours). */
  deletedAt: number | null;
  /** Each try of its DELETE (server port, answer, duration), for a report of deliveries after it. */
  readonly deleteTries: string[];
}

export interface Delivery {
  readonly label: string;
  readonly request: ReceivedRequest;
  /** Date.now() when the receiver read the whole request. */
  readonly at: number;
  /** How long before `at` it may have arrived (the receiver's thread did not run meanwhile). */
  readonly lagMs: number;
  readonly status: number;
}

export interface Hooks {
  readonly subscriptions: Subscription[];
  readonly deliveries: Delivery[];
  /** Creates answered "carried out, answer lost" whose subscription is not there. */
  readonly lostCreates: string[];
  /** Creates a subscription and waits until the create is decided; `fromOffset` for one made before any traffic. */
  create(workspace: Workspace, label: string, events: readonly string[], fromOffset?: number): Promise<Subscription>;
  /** Adds and deletes subscriptions of `workspace` until stopped. */
  churn(workspace: Workspace, random: Random, stopped: () => boolean): Promise<void>;
  close(): Promise<void>;
}

const TRANSIENT_AT_ONCE = 3;
/** How long a subscription's deliveries fail before its DELETE (several retry delays). */
const FAIL_BEFORE_DELETE_MS = [200, 800] as const;
const FILTERS: readonly (readonly string[])[] = [[], ['ticket.created', 'message.created'], ['ticket.closed', 'ticket.reopened', 'ticket.rated', 'contact.created']];

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const RECEIVER = new URL(`./receiver-thread${extname(fileURLToPath(import.meta.url))}`, import.meta.url);

export const startHooks = async (baseUrl: () => string, keepRetrying: () => boolean): Promise<Hooks> => {
  const subscriptions: Subscription[] = [];
  const deliveries: Delivery[] = [];
  const lostCreates: string[] = [];
  /** Where each workspace's feed ended when last asked: the next ask reads on from there. */
  const feedEnds = new Map<Workspace, number>();
  const thread = startWorker(RECEIVER, { workerData: {}, name: 'torture-receiver' });
  const tell = (message: ToReceiver) => thread.postMessage(message);
  let closed = (): void => {};
  const receiverUrl = await new Promise<string>((resolve, reject) => {
    thread.once('error', reject);
    thread.on('message', (message: FromReceiver) => {
      if (message.kind === 'ready') resolve(message.url);
      else if (message.kind === 'closed') closed();
      // A Buffer crosses threads as a plain Uint8Array.
      else deliveries.push({ label: message.label, request: { ...message.request, body: Buffer.from(message.request.body) }, at: message.at, lagMs: message.lagMs, status: message.status });
    });
  });

  const remove = async (sub: Subscription, random?: Random) => {
    sub.deleteSentAt ??= Date.now();
    if (random !== undefined) {
      tell({ kind: 'failing', label: sub.label });
      await pause(random.int(...FAIL_BEFORE_DELETE_MS));
    }
    // A DELETE may be sent again: 404 then means an earlier try deleted it.
    const decision = await decide(baseUrl, { method: 'DELETE', path: `/api/v1/webhooks/${sub.id}`, token: sub.workspace.apiKey }, keepRetrying, undefined, sub.deleteTries);
    if (decision.answer?.status === 204 || decision.answer?.status === 404) sub.deletedAt = Date.now();
  };

  /** "Carried out, answer lost": the subscription must exist. It is found by its label, and deleted (its secret is unknown). */
  const adopt = async (sub: Subscription) => {
    for (;;) {
      const listed = await send(baseUrl(), { method: 'GET', path: '/api/v1/webhooks', token: sub.workspace.apiKey });
      if (listed.kind === 'answer' && listed.answer.status === 200) {
        sub.id = (listed.answer.body.items as { id: string; description: string }[]).find((i) => i.description === sub.label)?.id ?? null;
        break;
      }
      await pause(100);
    }
    if (sub.id === null) lostCreates.push(`${sub.label}: answered idempotent_answer_lost, but no such subscription`);
    else await remove(sub);
  };

  const create: Hooks['create'] = async (workspace, label, events, fromOffset) => {
    const sub: Subscription = { label, workspace, events, createOutcome: 'pending', id: null, secret: null, fromOffset: null, deleteSentAt: null, deletedAt: null, deleteTries: [] };
    subscriptions.push(sub);
    const body = { url: `${receiverUrl}/${label}`, events, description: label };
    const decision = await decide(baseUrl, { method: 'POST', path: '/api/v1/webhooks', token: workspace.apiKey, key: label, body }, keepRetrying);
    sub.createOutcome = decision.outcome;
    if (decision.outcome === 'answer_lost') await adopt(sub);
    if (decision.outcome !== 'acked' || decision.answer === null) return sub;
    sub.id = String(decision.answer.body.id);
    sub.secret = String(decision.answer.body.secret);
    // Everything past the feed's end, read after the create's answer, came after the subscription.
    sub.fromOffset = fromOffset ?? (await feedEnd(baseUrl, workspace, feedEnds.get(workspace) ?? 0));
    feedEnds.set(workspace, Math.max(sub.fromOffset, feedEnds.get(workspace) ?? 0));
    return sub;
  };

  return {
    subscriptions,
    deliveries,
    lostCreates,
    create,
    async churn(workspace, random, stopped) {
      let seq = 0;
      while (!stopped()) {
        await pause(random.int(300, 1500));
        const alive = subscriptions.filter((s) => s.workspace === workspace && s.label.includes('-churn-') && s.id !== null && s.deleteSentAt === null);
        if (alive.length < TRANSIENT_AT_ONCE && random.chance(0.6)) await create(workspace, `${workspace.name}-churn-${++seq}`, random.pick(FILTERS));
        else if (alive.length > 0) await remove(random.pick(alive), random);
      }
    },
    async close() {
      await new Promise<void>((resolve) => {
        closed = resolve;
        tell({ kind: 'close' });
      });
      await thread.terminate();
    },
  };
};
