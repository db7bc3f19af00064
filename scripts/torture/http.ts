// One HTTP request of the torture's clients, and what its outcome says about the write it carried.
// A request that never reached a listening server (connection refused) wrote nothing; any other
// network failure may have written or not: "unknown", as a real client would see it.
export interface Answer {
  readonly status: number;
  readonly headers: Headers;
  /** Parsed JSON, or the text ('' for none). */
  readonly body: any;
}

export type Sent = { readonly kind: 'answer'; readonly answer: Answer } | { readonly kind: 'unreached' } | { readonly kind: 'unknown'; readonly error: string };

export interface RequestSpec {
  readonly method: string;
  readonly path: string;
  readonly token: string;
  readonly body?: unknown;
  readonly key?: string;
  /** Long polls wait on the server: their deadline is longer. */
  readonly timeoutMs?: number;
}

const DEFAULT_TIMEOUT_MS = 30_000;

const refused = (error: unknown): boolean => {
  const cause = (error as { cause?: { code?: string; errors?: { code?: string }[] } }).cause;
  return cause?.code === 'ECONNREFUSED' || (cause?.errors ?? []).some((e) => e.code === 'ECONNREFUSED');
};

export const send = async (baseUrl: string, spec: RequestSpec): Promise<Sent> => {
  const headers: Record<string, string> = { authorization: `Bearer ${spec.token}` };
  if (spec.body !== undefined) headers['content-type'] = 'application/json';
  if (spec.key !== undefined) headers['idempotency-key'] = spec.key;
  try {
    const response = await fetch(`${baseUrl}${spec.path}`, {
      method: spec.method,
      headers,
      ...(spec.body === undefined ? {} : { body: JSON.stringify(spec.body) }),
      signal: AbortSignal.timeout(spec.timeoutMs ?? DEFAULT_TIMEOUT_MS),
    });
    const text = await response.text();
    const json = (response.headers.get('content-type') ?? '').includes('json') && text !== '';
    return { kind: 'answer', answer: { status: response.status, headers: response.headers, body: json ? JSON.parse(text) : text } };
  } catch (error) {
    return refused(error) ? { kind: 'unreached' } : { kind: 'unknown', error: String((error as { cause?: unknown }).cause ?? error) };
  }
};
