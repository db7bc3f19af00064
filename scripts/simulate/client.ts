// The simulator's requests. Every answer is counted: a 2xx, a refusal the simulator provoked on
// purpose (`intended`), or an error by status and error code, never hidden. Traffic requests wait for
// the pacer (the --rate); the scripted tours and the billing waits do not.
import { send, type Answer, type Sent } from '../torture/http.js';
import type { Workspace } from '../torture/ledger.js';

export interface Tally {
  requests: number;
  /** Non-2xx answers the simulator did not intend, by "status CODE" (or "network"). */
  readonly errors: Map<string, number>;
  /** Refusals it provoked on purpose, by "status CODE". */
  readonly refused: Map<string, number>;
  /** One example of each error, for the report. */
  readonly examples: Map<string, string>;
}

export const createTally = (): Tally => ({ requests: 0, errors: new Map(), refused: new Map(), examples: new Map() });

export const tallyObject = (counts: ReadonlyMap<string, number>): Record<string, number> => Object.fromEntries([...counts].sort(([a], [b]) => a.localeCompare(b)));

/** A simulated workspace: its key, and whether its plan may be the entry plan now (a billing scenario). */
export interface SimWorkspace extends Workspace {
  /** Set while a billing scenario may leave it on the entry plan, whose monthly ticket limit is low. */
  entryPlanRisk: boolean;
}

/** A flow stops at the first answer it did not want (already counted) or when the run is over. */
export class Abandon extends Error {}

export interface Call {
  readonly method: string;
  readonly path: string;
  readonly body?: unknown;
  /** A multipart form instead of a JSON body (media uploads). */
  readonly form?: FormData;
  /** Whether a non-2xx answer, as "status CODE", is a refusal provoked on purpose (asked at answer time). */
  readonly intended?: (key: string) => boolean;
}

/** Runs `flow`; a flow cut short by an answer it did not want (already counted) or by the end is over. */
export const attempt = async (flow: () => Promise<void>): Promise<void> => {
  try {
    await flow();
  } catch (error) {
    if (!(error instanceof Abandon)) throw error;
  }
};

export const only =
  (...keys: string[]) =>
  (key: string): boolean =>
    keys.includes(key);

const keyOf = (answer: Answer): string => {
  const code = typeof answer.body === 'object' && answer.body !== null ? answer.body.error_code : undefined;
  return typeof code === 'string' ? `${answer.status} ${code}` : String(answer.status);
};

/** A multipart POST, answered as `send` answers (../torture/http.ts sends JSON only). */
const sendForm = async (url: string, path: string, token: string, form: FormData): Promise<Sent> => {
  try {
    const response = await fetch(`${url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: form, signal: AbortSignal.timeout(30_000) });
    const text = await response.text();
    return { kind: 'answer', answer: { status: response.status, headers: response.headers, body: (response.headers.get('content-type') ?? '').includes('json') && text !== '' ? JSON.parse(text) : text } };
  } catch (error) {
    return { kind: 'unknown', error: String((error as { cause?: unknown }).cause ?? error) };
  }
};

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Spaces requests evenly at `perSecond` across all callers. */
export const createPacer = (perSecond: number) => {
  let next = Date.now();
  return async (): Promise<void> => {
    const at = Math.max(Date.now(), next);
    next = at + 1000 / perSecond;
    if (at > Date.now()) await sleep(at - Date.now());
  };
};

export interface Sim {
  readonly url: string;
  readonly adminToken: string;
  readonly tally: Tally;
  /** The run's deadline has passed: paced traffic sends nothing more. */
  stopped(): boolean;
  log(line: string): void;
  /** Counts an error that is not an HTTP answer (`key`: what failed); answers the Abandon to throw. */
  fail(key: string, example: string): Abandon;
  /**
   * Sends one request with `token`; answers the body of a 2xx or of an intended refusal, and throws
   * Abandon otherwise (counted first). `paced`: waits for the pacer, and sends nothing once stopped.
   */
  request(token: string, call: Call, paced: boolean): Promise<any>;
}

export const createSim = (url: string, adminToken: string, perSecond: number, deadline: number, log: (line: string) => void): Sim => {
  const tally = createTally();
  const pace = createPacer(perSecond);
  const stopped = () => Date.now() >= deadline;
  const count = (into: Map<string, number>, key: string) => into.set(key, (into.get(key) ?? 0) + 1);
  const error = (key: string, example: string) => {
    count(tally.errors, key);
    if (!tally.examples.has(key)) {
      tally.examples.set(key, example);
      log(`error ${key}: ${example}`);
    }
    return new Abandon(key);
  };
  return {
    url,
    adminToken,
    tally,
    stopped,
    log,
    fail: error,
    async request(token, call, paced) {
      if (paced) {
        if (stopped()) throw new Abandon('stopped');
        await pace();
        if (stopped()) throw new Abandon('stopped');
      }
      tally.requests += 1;
      const sent =
        call.form === undefined
          ? await send(url, { method: call.method, path: call.path, token, ...(call.body === undefined ? {} : { body: call.body }) })
          : await sendForm(url, call.path, token, call.form);
      const what = `${call.method} ${call.path}`;
      if (sent.kind !== 'answer') throw error('network', `${what}: ${sent.kind === 'unknown' ? sent.error : 'connection refused'}`);
      const { answer } = sent;
      if (answer.status >= 200 && answer.status < 300) return answer.body;
      const key = keyOf(answer);
      if (call.intended?.(key) === true) {
        count(tally.refused, key);
        return answer.body;
      }
      throw error(key, `${what} ${JSON.stringify(call.body ?? null).slice(0, 300)} → ${JSON.stringify(answer.body).slice(0, 500)}`);
    },
  };
};

/** The public API of one workspace, and its internal routes (/internal/v1/workspaces/{id}…). */
export const routesOf = (sim: Sim, ws: SimWorkspace, paced: boolean) => ({
  api: (method: string, path: string, body?: unknown, intended?: Call['intended']) =>
    sim.request(ws.apiKey, { method, path: `/api/v1${path}`, body, ...(intended === undefined ? {} : { intended }) }, paced),
  internal: (method: string, path: string, body?: unknown, intended?: Call['intended']) =>
    sim.request(sim.adminToken, { method, path: `/internal/v1/workspaces/${ws.id}${path}`, body, ...(intended === undefined ? {} : { intended }) }, paced),
  upload(fileName: string, contentType: string, bytes: Uint8Array) {
    const form = new FormData();
    form.append('file', new Blob([bytes], { type: contentType }), fileName);
    return sim.request(ws.apiKey, { method: 'POST', path: '/api/v1/media/upload', form }, paced);
  },
});

export type Routes = ReturnType<typeof routesOf>;
