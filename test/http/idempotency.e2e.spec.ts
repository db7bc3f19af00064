// Idempotency-Key on POST against the real server: a retried request is answered with the first
// answer and acts once, also when retried at once, concurrently, after a restart and after a crash
// that lost the answer; another request under the same key is refused; a refused request frees it.
import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import * as path from 'node:path';
import { thisHolder } from '../../src/app/holder.js';
import { CLAIM_METADATA, IDEMPOTENCY_EVENTS } from '../../src/domain/idempotency/idempotency.js';
import { ticketStream } from '../../src/domain/ticket/ticket.js';
import { idempotencyStream } from '../../src/http/middleware/idempotency.js';
import { ADMIN_TOKEN, call, startTestService, type Reply, type TestService, type TestWorkspace } from '../support/server.js';
import { uniqueEmail } from '../support/tickets-fixtures.js';

/** A ticket request with a subject of its own, so its tickets can be counted in the log. */
const ticketBody = () => ({ contact: { email: uniqueEmail() }, subject: `Broken order ${randomUUID()}`, message: 'It arrived broken.' });

describe('Idempotency-Key (e2e)', function () {
  this.timeout(60_000);
  let ts: TestService;
  let ws: TestWorkspace;

  before(async () => {
    ts = await startTestService();
    ws = await ts.createWorkspace();
  });
  after(() => ts.close());

  const post = (path: string, body: unknown, key: string, on: TestWorkspace = ws) => on.api('POST', path, body, { 'idempotency-key': key });
  const ticketsOf = async (subject: string, on: TestWorkspace = ws) =>
    (await ts.service.core.log.readAll({ after: 0, types: ['ticket.created'], workspaceId: on.workspaceId })).filter((e) => e.data['subject'] === subject).length;
  const expectSameAnswer = (replayed: Reply, first: Reply) => {
    expect(replayed.status).to.equal(first.status);
    expect(replayed.body).to.deep.equal(first.body);
    expect(replayed.headers.get('idempotent-replayed')).to.equal('true');
  };

  it('answers a retried POST with the first answer and creates one ticket', async () => {
    const body = ticketBody();
    const first = await post('/api/v1/tickets', body, 'order-1');
    expect(first.status).to.equal(201);
    expect(first.headers.get('idempotent-replayed')).to.equal(null);
    const again = await post('/api/v1/tickets', { ...body }, 'order-1');
    expectSameAnswer(again, first);
    // The same JSON with its keys in another order is the same request.
    const reordered = Object.fromEntries(Object.entries(body).reverse());
    expectSameAnswer(await post('/api/v1/tickets', reordered, 'order-1'), first);
    expect(await ticketsOf(body.subject)).to.equal(1);
  });

  it('records the claim on the command\'s own events, in the same append', async () => {
    const first = await post('/api/v1/tickets', ticketBody(), 'order-meta');
    const events = await ts.service.core.log.readStream(ticketStream(String(first.body.id)));
    const claims = new Set(events.map((e) => e.metadata[CLAIM_METADATA]));
    expect(claims.size).to.equal(1);
    const [claim] = [...claims];
    expect(claim).to.be.a('string');
    const keyEvents = await ts.service.core.log.readStream(idempotencyStream(ws.workspaceId, 'order-meta'));
    expect(keyEvents.map((e) => e.type)).to.deep.equal([IDEMPOTENCY_EVENTS.claimed, IDEMPOTENCY_EVENTS.answered]);
    expect(keyEvents[0]?.data['claim_id']).to.equal(claim);
  });

  it('refuses the key for another body or another path with 422 IDEMPOTENCY_KEY_REUSED', async () => {
    expect((await post('/api/v1/tickets', ticketBody(), 'order-2')).status).to.equal(201);
    for (const [path, body] of [
      ['/api/v1/tickets', ticketBody()],
      ['/api/v1/contacts', { email: uniqueEmail() }],
    ] as const) {
      const reused = await post(path, body, 'order-2');
      expect(reused.status).to.equal(422);
      expect(reused.body).to.include({ error_code: 'IDEMPOTENCY_KEY_REUSED' });
      expect(reused.body.request_id).to.equal(reused.headers.get('x-request-id'));
    }
  });

  it('keeps keys apart per workspace', async () => {
    const other = await ts.createWorkspace();
    const body = ticketBody();
    const mine = await post('/api/v1/tickets', body, 'shared-key');
    const theirs = await post('/api/v1/tickets', body, 'shared-key', other);
    expect(theirs.status).to.equal(201);
    expect(theirs.body.id).to.not.equal(mine.body.id);
    expect(theirs.headers.get('idempotent-replayed')).to.equal(null);
  });

  it('acts once for 16 concurrent tries of one request; the others replay or are told to retry', async () => {
    const body = ticketBody();
    const replies = await Promise.all(Array.from({ length: 16 }, () => post('/api/v1/tickets', body, 'burst-1')));
    expect(await ticketsOf(body.subject)).to.equal(1);
    const created = replies.filter((r) => r.status === 201);
    expect(new Set(created.map((r) => r.body.id)).size).to.equal(1);
    for (const r of replies.filter((x) => x.status !== 201)) {
      expect(r.status).to.equal(409);
      expect(r.body).to.include({ error_code: 'CONFLICT' });
      expect(r.headers.get('retry-after')).to.equal('1');
    }
    expectSameAnswer(await post('/api/v1/tickets', body, 'burst-1'), created[0] as Reply);
  });

  it('frees the key after an answer that changed nothing, so a corrected retry runs', async () => {
    const refused = await post('/api/v1/tickets', { ...ticketBody(), priority: 'urgent!' }, 'fix-me');
    expect(refused.status).to.equal(422);
    const corrected = await post('/api/v1/tickets', ticketBody(), 'fix-me');
    expect(corrected.status).to.equal(201);
    expect(corrected.headers.get('idempotent-replayed')).to.equal(null);
  });

  it('binds the key to a business refusal (it was decided), and replays it', async () => {
    const missing = '0'.repeat(32);
    const first = await post(`/api/v1/tickets/${missing}/messages`, { content: 'hi' }, 'biz-1');
    expect(first.status).to.equal(404);
    expectSameAnswer(await post(`/api/v1/tickets/${missing}/messages`, { content: 'hi' }, 'biz-1'), first);
  });

  it('refuses a malformed key with a schema 422 on the header, an empty one too (never taken for no key)', async () => {
    for (const key of ['x'.repeat(256), 'has space', 'tab\tkey', '']) {
      const reply = await post('/api/v1/tickets', ticketBody(), key);
      expect(reply.status).to.equal(422);
      expect(reply.body.detail[0].loc).to.deep.equal(['header', 'idempotency-key']);
    }
  });

  it('replays an upload instead of storing the file twice', async () => {
    const form = () => {
      const f = new FormData();
      f.append('file', new Blob([new Uint8Array(100).fill(7)], { type: 'image/png' }), 'pic.png');
      return f;
    };
    const send = () =>
      fetch(`${ts.url}/api/v1/media/upload`, { method: 'POST', headers: { authorization: `Bearer ${ws.apiKey}`, 'idempotency-key': 'upload-1' }, body: form() });
    const first = await send();
    const again = await send();
    expect(again.status).to.equal(first.status);
    expect(await again.json()).to.deep.equal(await first.json());
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
  });

  describe('after a crash that lost the answer', () => {
    /** Leaves the key claimed, by default with a lease that has run out, as a killed server leaves it. */
    const abandonClaim = async (key: string, claimId: string, fingerprintOf: string, scope = ws.workspaceId, claim = { leaseUntilMs: Date.now() - 1, holder: 'elsewhere:1:0' }) =>
      ts.service.core.log.append(
        idempotencyStream(scope, key),
        [
          {
            id: `${claimId}-event`,
            type: IDEMPOTENCY_EVENTS.claimed,
            workspaceId: ws.workspaceId,
            data: { claim_id: claimId, fingerprint: fingerprintOf, lease_until_ms: claim.leaseUntilMs, holder: claim.holder },
          },
        ],
        'no_stream',
      );
    const keyEventsOf = async (workspaceId: string) =>
      (await ts.service.core.log.readAll({ after: 0, types: ['api_key.issued'], workspaceId })).length;

    it('runs the retry when the interrupted request wrote nothing', async () => {
      const body = ticketBody();
      // The fingerprint of the request as the server computes it: take it from a claim it made.
      const probe = await post('/api/v1/tickets', body, 'probe-key');
      const fingerprint = String((await ts.service.core.log.readStream(idempotencyStream(ws.workspaceId, 'probe-key')))[0]?.data['fingerprint']);
      await abandonClaim('crash-1', 'claim-nothing-written', fingerprint);
      const retried = await post('/api/v1/tickets', body, 'crash-1');
      expect(retried.status).to.equal(201);
      expect(retried.body.id).to.not.equal(probe.body.id);
    });

    it('tells the retry of an admin request that cannot be resumed that it was interrupted after writing, and never runs it again', async () => {
      // A new API key exists only in its answer (the log keeps its hash): such a request is not resumed.
      const keys = `/admin/v1/workspaces/${ws.workspaceId}/keys`;
      const adminPost = (key: string) => call(`${ts.url}${keys}`, 'POST', ADMIN_TOKEN, {}, { 'idempotency-key': key });
      await adminPost('probe-key-2');
      const fingerprint = String((await ts.service.core.log.readStream(idempotencyStream('admin', 'probe-key-2')))[0]?.data['fingerprint']);
      await abandonClaim('crash-2', 'claim-that-wrote', fingerprint, 'admin');
      // What the interrupted request wrote before the crash: an event carrying its claim.
      await ts.service.core.log.append(`workspace-${'f'.repeat(32)}`, [{ id: 'written-before-crash', type: 'workspace.note', workspaceId: ws.workspaceId, data: {}, metadata: { [CLAIM_METADATA]: 'claim-that-wrote' } }], 'any');
      const keysBefore = await keyEventsOf(ws.workspaceId);
      const retried = await adminPost('crash-2');
      expect(retried.status).to.equal(409);
      expect(retried.body.detail).to.deep.equal({ reason: 'idempotent_answer_lost' });
      expect(await keyEventsOf(ws.workspaceId)).to.equal(keysBefore);
      expectSameAnswer(await adminPost('crash-2'), retried);
    });

    it('takes over at once a claim whose holder process is gone, and waits out the lease of a live one', async () => {
      const body = ticketBody();
      await post('/api/v1/tickets', body, 'probe-key-3');
      const fingerprint = String((await ts.service.core.log.readStream(idempotencyStream(ws.workspaceId, 'probe-key-3')))[0]?.data['fingerprint']);
      const gone = spawnSync(process.execPath, ['-e', '']).pid;
      await abandonClaim('killed-holder', 'claim-of-killed', fingerprint, ws.workspaceId, { leaseUntilMs: Date.now() + 600_000, holder: `${hostname()}:${gone}:0a0b0c0d0e0f` });
      const taken = await post('/api/v1/tickets', body, 'killed-holder');
      expect(taken.status).to.equal(201);
      await abandonClaim('live-holder', 'claim-of-live', fingerprint, ws.workspaceId, { leaseUntilMs: Date.now() + 600_000, holder: thisHolder });
      const waiting = await post('/api/v1/tickets', body, 'live-holder');
      expect(waiting.status).to.equal(409);
      expect(waiting.body.detail).to.deep.equal({ reason: 'idempotency_key_in_use' });
      expect(waiting.headers.get('retry-after')).to.equal('1');
      expect(await ticketsOf(body.subject)).to.equal(2);
    });
  });
});

describe('Idempotency-Key across a restart (e2e)', () => {
  it('replays the first answer from the log after the server restarts', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'sp-idempotency-'));
    const first = await startTestService({}, { dataDir });
    const ws = await first.createWorkspace();
    const body = ticketBody();
    const created = await ws.api('POST', '/api/v1/tickets', body, { 'idempotency-key': 'restart-1' });
    await first.close();
    const second = await startTestService({}, { dataDir });
    try {
      const again = await postTicket(second.url, ws.apiKey, body);
      expect(again.status).to.equal(201);
      expect(again.body).to.deep.equal(created.body);
      expect(again.headers.get('idempotent-replayed')).to.equal('true');
    } finally {
      await second.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('Idempotency-Key: answers that hold a secret (e2e)', () => {
  const K1 = '11'.repeat(32);
  const K2 = '22'.repeat(32);
  const issueWorkspace = (url: string) => call(`${url}/admin/v1/workspaces`, 'POST', ADMIN_TOKEN, { name: 'sealed' }, { 'Idempotency-Key': 'sealed-1' });

  it('replays an API key from its sealed record across a restart and a change of key that keeps the old one in the ring; without it, says the answer is lost', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'sp-idempotency-sealed-'));
    const run = async (env: Record<string, string>, work: (url: string) => Promise<void>) => {
      const service = await startTestService(env, { dataDir });
      try {
        await work(service.url);
      } finally {
        await service.close();
      }
    };
    try {
      let first: Reply | undefined;
      await run({ WEBHOOK_SECRET_KEY: K1 }, async (url) => {
        first = await issueWorkspace(url);
        expect(first.status).to.equal(201);
      });
      await run({ WEBHOOK_SECRET_KEY: K2, WEBHOOK_PREVIOUS_SECRET_KEYS: K1 }, async (url) => {
        const again = await issueWorkspace(url);
        expect(again.headers.get('idempotent-replayed')).to.equal('true');
        expect(again.body).to.deep.equal(first?.body);
      });
      // The key that sealed it is gone from the ring: the answer cannot be given again, and no second workspace is made.
      await run({ WEBHOOK_SECRET_KEY: K2 }, async (url) => {
        const lost = await issueWorkspace(url);
        expect(lost.status).to.equal(409);
        expect(lost.body).to.deep.include({ error_code: 'CONFLICT', detail: { reason: 'idempotent_answer_lost' } });
        expect(JSON.stringify(lost.body)).to.not.include(String(first?.body['api_key']));
      });
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

const postTicket = async (url: string, key: string, body: unknown) => {
  const response = await fetch(`${url}/api/v1/tickets`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': 'restart-1' },
    body: JSON.stringify(body),
  });
  return { status: response.status, headers: response.headers, body: (await response.json()) as Record<string, unknown> };
};
