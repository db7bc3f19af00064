// The long-poll iterator against a real local HTTP server that answers as each test scripts it.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, test } from 'node:test';
import { retryAfterMs, updates, UpdatesError, type FeedItem } from '../src/index.js';

type Answer = (res: ServerResponse) => void;

const json = (status: number, body: unknown, headers: Record<string, string> = {}): Answer => (res) => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
};

const item = (offset: number, type = 'ticket.updated') => ({
  id: `e${offset}`,
  type,
  timestamp: '2026-01-01T00:00:00.000000+00:00',
  workspace_id: 'w1',
  data: { ticket_id: 't1' },
  _links: {},
  offset,
});

/** Serves the answers in order (the last one again when they run out) and records each request. */
const scripted = async (answers: Answer[]) => {
  const requests: IncomingMessage[] = [];
  const server = createServer((req, res) => {
    requests.push(req);
    (answers.length > 1 ? answers.shift()! : answers[0]!)(res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, requests, close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }) };
};

const take = async (iterable: AsyncIterable<FeedItem>, count: number): Promise<FeedItem[]> => {
  const got: FeedItem[] = [];
  for await (const event of iterable) {
    got.push(event);
    if (got.length === count) break;
  }
  return got;
};

const offsetOf = (req: IncomingMessage): string | null => new URL(req.url ?? '', 'http://x').searchParams.get('offset');

describe('updates', () => {
  test('yields events across pages and asks each page from the previous next_offset', async () => {
    const server = await scripted([json(200, { items: [item(10), item(11)], next_offset: 12 }), json(200, { items: [], next_offset: 12 }), json(200, { items: [item(20)], next_offset: 21 })]);
    try {
      const poll = updates({ url: server.url, apiKey: 'k', offset: 5, types: ['ticket.updated', 'ticket.created'], timeoutSeconds: 1 });
      assert.deepEqual((await take(poll, 3)).map((e) => e.offset), [10, 11, 20]);
      assert.deepEqual(server.requests.map(offsetOf), ['5', '12', '12']);
      assert.equal(poll.offset, 21);
      const first = new URL(server.requests[0]!.url ?? '', 'http://x');
      assert.equal(first.searchParams.get('types'), 'ticket.updated,ticket.created');
      assert.equal(server.requests[0]!.headers.authorization, 'Bearer k');
    } finally {
      await server.close();
    }
  });
  test('a consumer that stops mid-page resumes after the last event it took', async () => {
    const server = await scripted([json(200, { items: [item(10), item(11), item(12)], next_offset: 13 })]);
    try {
      const poll = updates({ url: server.url, apiKey: 'k' });
      await take(poll, 2);
      assert.equal(poll.offset, 12);
    } finally {
      await server.close();
    }
  });
  test('429 and 503 are retried after Retry-After, other 5xx and network errors with backoff, keeping the offset', async () => {
    const server = await scripted([
      json(429, { error_code: 'RATE_LIMIT_EXCEEDED' }, { 'retry-after': '0' }),
      json(503, { error_code: 'SERVICE_UNAVAILABLE' }, { 'retry-after': '0' }),
      json(500, { error_code: 'INTERNAL_ERROR' }),
      (res) => res.socket?.destroy(),
      json(502, 'bad gateway'),
      json(200, { items: [item(30)], next_offset: 31 }),
    ]);
    try {
      const poll = updates({ url: server.url, apiKey: 'k', offset: 30, initialDelayMs: 1, maxDelayMs: 4 });
      assert.deepEqual((await take(poll, 1)).map((e) => e.id), ['e30']);
      assert.deepEqual(server.requests.map(offsetOf), ['30', '30', '30', '30', '30', '30']);
    } finally {
      await server.close();
    }
  });
  test('an answer retrying cannot fix (a bad key) is thrown with its status and body', async () => {
    const server = await scripted([json(401, { detail: 'Invalid API key' })]);
    try {
      await assert.rejects(take(updates({ url: server.url, apiKey: 'bad' }), 1), (e: unknown) => e instanceof UpdatesError && e.status === 401 && /Invalid API key/.test(e.body));
      assert.equal(server.requests.length, 1);
    } finally {
      await server.close();
    }
  });
  test('an abort stops a poll waiting out a backoff', async () => {
    const server = await scripted([json(500, {})]);
    try {
      const stop = new AbortController();
      const poll = take(updates({ url: server.url, apiKey: 'k', initialDelayMs: 60_000, signal: stop.signal }), 1);
      while (server.requests.length === 0) await new Promise((r) => setTimeout(r, 5));
      stop.abort(new Error('stopped'));
      await assert.rejects(poll, /stopped/);
    } finally {
      await server.close();
    }
  });
  test('Retry-After reads seconds and HTTP dates, and nothing else', () => {
    assert.equal(retryAfterMs('3'), 3000);
    assert.equal(retryAfterMs(new Date(61_000).toUTCString(), 1000), 60_000);
    assert.equal(retryAfterMs('soon'), undefined);
    assert.equal(retryAfterMs(null), undefined);
  });
});
