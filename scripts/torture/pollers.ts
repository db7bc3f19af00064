// Long-polling consumers of /api/v1/updates, as an integrator runs them: each keeps its next_offset
// across the crashes and remembers what it saw, so the checks can tell whether the feed ever moved
// an event behind a cursor that had passed it (the consumer would never see it).
import { send } from './http.js';
import type { Workspace } from './ledger.js';

export interface Poller {
  readonly name: string;
  readonly workspace: Workspace;
  /** Event types asked for (all when empty). */
  readonly types: readonly string[];
  /** Event id → offset, as received. */
  readonly seen: Map<string, number>;
  cursor: number;
  /** Items that came again, or at an offset below the cursor asked for. */
  readonly disorder: string[];
}

const POLL_TIMEOUT_S = 2;
const PAUSE_AFTER_FAILURE_MS = 50;

export const createPoller = (name: string, workspace: Workspace, types: readonly string[] = []): Poller => ({ name, workspace, types, seen: new Map(), cursor: 0, disorder: [] });

export const runPoller = async (p: Poller, baseUrl: () => string, stopped: () => boolean): Promise<void> => {
  const filter = p.types.length === 0 ? '' : `&types=${p.types.join(',')}`;
  while (!stopped()) {
    const sent = await send(baseUrl(), {
      method: 'GET',
      path: `/api/v1/updates?offset=${p.cursor}&limit=100&timeout=${POLL_TIMEOUT_S}${filter}`,
      token: p.workspace.apiKey,
      timeoutMs: (POLL_TIMEOUT_S + 10) * 1000,
    });
    if (sent.kind !== 'answer' || sent.answer.status !== 200) {
      await new Promise((resolve) => setTimeout(resolve, PAUSE_AFTER_FAILURE_MS));
      continue;
    }
    for (const item of sent.answer.body.items as { id: string; offset: number }[]) {
      if (item.offset < p.cursor || p.seen.has(item.id)) p.disorder.push(`${p.name}: ${item.id} at offset ${item.offset} after cursor ${p.cursor}`);
      p.seen.set(item.id, item.offset);
      p.cursor = item.offset + 1;
    }
    p.cursor = Math.max(p.cursor, Number(sent.answer.body.next_offset));
  }
};
