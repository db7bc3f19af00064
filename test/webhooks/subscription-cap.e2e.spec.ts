// WEBHOOK_MAX_SUBSCRIPTIONS over real HTTP: the cap per workspace, exact under concurrency in one
// process and across two API processes on one log, kept across a restart, and not leaked by a create
// or a delete that dies half-way.
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { SLOT_EVENTS, slotsStream } from '../../src/domain/subscription/slots.js';
import { subscriptionStream } from '../../src/domain/subscription/subscription.js';
import { systemMicros } from '../../src/log/clock.js';
import { randomId } from '../../src/shared/ids.js';
import { createSecretBox, loadSecretKey } from '../../src/webhooks/secrets.js';
import { runSubscriptionCommand, secretContext } from '../../src/webhooks/subscriptions.js';
import { createProcessGroup, type ProcessGroup } from '../support/processes.js';
import { ADMIN_TOKEN, call, startTestService, type Reply, type TestService, type TestWorkspace } from '../support/server.js';
import { eventually } from '../support/webhooks-dispatch.js';

const HOOK = { url: 'http://127.0.0.1:9/hook' };

const statuses = (replies: readonly Reply[]) => replies.reduce<Record<number, number>>((n, r) => ({ ...n, [r.status]: (n[r.status] ?? 0) + 1 }), {});

const expectLimitReached = (reply: Reply, max: number) => {
  expect(reply.status, JSON.stringify(reply.body)).to.equal(422);
  expect(reply.body).to.have.all.keys('error_code', 'error_message', 'detail', 'request_id');
  expect(reply.body).to.include({ error_code: 'WEBHOOK_LIMIT_REACHED', request_id: reply.headers.get('x-request-id') });
  expect(reply.body.error_message).to.include(`limit of ${max} webhook subscriptions`);
  expect(reply.body.detail).to.deep.equal({ max_subscriptions: max });
};

describe('webhook subscription cap (e2e)', () => {
  let ts: TestService;
  let ws: TestWorkspace;
  const create = (body: Record<string, unknown> = HOOK, workspace = ws) => workspace.api('POST', '/api/v1/webhooks', body);
  const listed = async (workspace = ws) => ((await workspace.api('GET', '/api/v1/webhooks')).body.items as { id: string }[]).map((i) => i.id);

  describe('one process', () => {
    before(async () => {
      ts = await startTestService({ WEBHOOK_MAX_SUBSCRIPTIONS: '3' });
    });
    after(() => ts.close());
    beforeEach(async () => {
      ws = await ts.createWorkspace();
    });

    it('refuses a subscription beyond the cap with 422 WEBHOOK_LIMIT_REACHED; inactive ones count, deleted ones free their slot', async () => {
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const reply = await create();
        expect(reply.status).to.equal(201);
        ids.push(reply.body.id);
      }
      expectLimitReached(await create(), 3);
      expect((await ws.api('PATCH', `/api/v1/webhooks/${ids[0]}`, { is_active: false })).status).to.equal(200);
      expectLimitReached(await create(), 3);
      expect(await listed()).to.have.members(ids);

      expect((await ws.api('DELETE', `/api/v1/webhooks/${ids[1]}`)).status).to.equal(204);
      const again = await create();
      expect(again.status).to.equal(201);
      expectLimitReached(await create(), 3);
      expect(await listed()).to.have.members([ids[0], ids[2], again.body.id]);
    });

    it('counts each workspace apart', async () => {
      for (let i = 0; i < 3; i++) expect((await create()).status).to.equal(201);
      const other = await ts.createWorkspace();
      for (let i = 0; i < 3; i++) expect((await create(HOOK, other)).status).to.equal(201);
      expectLimitReached(await create(HOOK, other), 3);
      expect(await listed(other)).to.have.length(3);
    });

    it('gives the slot of a refused create back', async () => {
      for (let i = 0; i < 2; i++) expect((await create()).status).to.equal(201);
      expect((await create({ ...HOOK, events: ['ticket.exploded'] })).body.error_code).to.equal('VALIDATION_ERROR');
      expect((await create()).status).to.equal(201);
      expectLimitReached(await create(), 3);
    });

    it('counts the subscriptions made before slots were counted', async () => {
      const { core } = ts.service;
      const secrets = createSecretBox(loadSecretKey({ secretKey: null, dataDir: ts.dataDir }));
      for (let i = 0; i < 2; i++) {
        const id = randomId();
        const secretEncrypted = secrets.encrypt('older-secret', secretContext(ws.workspaceId, id));
        await runSubscriptionCommand(core, ws.workspaceId, id, { kind: 'create', url: HOOK.url, events: [], description: 'older', secretEncrypted, at: '2026-01-01T00:00:00' }, undefined);
      }
      await eventually('the older subscriptions listed', async () => (await listed()).length === 2);
      expect((await create()).status).to.equal(201);
      expectLimitReached(await create(), 3);
    });
  });

  it('grants exactly the cap to 50 concurrent creates, then refuses', async () => {
    ts = await startTestService({ WEBHOOK_MAX_SUBSCRIPTIONS: '20' });
    try {
      ws = await ts.createWorkspace();
      const replies = await Promise.all(Array.from({ length: 50 }, () => create()));
      expect(statuses(replies)).to.deep.equal({ 201: 20, 422: 30 });
      replies.filter((r) => r.status === 422).forEach((r) => expectLimitReached(r, 20));
      expect(await listed()).to.have.members(replies.filter((r) => r.status === 201).map((r) => r.body.id));
      expect(await ts.service.core.log.readStream(slotsStream(ws.workspaceId))).to.have.length(20);
    } finally {
      await ts.close();
    }
  });

  it('keeps the count across a restart', async () => {
    const first = await startTestService({ WEBHOOK_MAX_SUBSCRIPTIONS: '2' });
    try {
      ws = await first.createWorkspace();
      const kept = (await create()).body.id as string;
      expect((await create()).status).to.equal(201);
      await first.service.close(); // the data folder stays until first.close()
      const second = await startTestService({ WEBHOOK_MAX_SUBSCRIPTIONS: '2' }, { dataDir: first.dataDir });
      try {
        const again = (method: string, p: string, body?: unknown) => call(`${second.url}${p}`, method, ws.apiKey, body);
        expectLimitReached(await again('POST', '/api/v1/webhooks', HOOK), 2);
        expect((await again('DELETE', `/api/v1/webhooks/${kept}`)).status).to.equal(204);
        expect((await again('POST', '/api/v1/webhooks', HOOK)).status).to.equal(201);
        expectLimitReached(await again('POST', '/api/v1/webhooks', HOOK), 2);
      } finally {
        await second.close();
      }
    } finally {
      await first.close();
    }
  });

  it('gives back, once old, the slots of a create that died after its claim and of a delete that died before its release', async () => {
    let skew = 0;
    ts = await startTestService({ WEBHOOK_MAX_SUBSCRIPTIONS: '3' }, { clock: () => systemMicros() + skew });
    try {
      ws = await ts.createWorkspace();
      const { log } = ts.service.core;
      const kept = (await create()).body.id as string;
      // A delete that died after its marker: the subscription is gone, its slot still held.
      const halfDeleted = (await create()).body.id as string;
      expect((await runSubscriptionCommand(ts.service.core, ws.workspaceId, halfDeleted, { kind: 'delete' }, undefined))._tag).to.equal('Right');
      // A create that died after its claim: a slot held for a subscription that never came to be.
      const neverCreated = randomId();
      const [last] = (await log.readStream(slotsStream(ws.workspaceId))).slice(-1);
      await log.append(
        slotsStream(ws.workspaceId),
        [{ id: randomId(), type: SLOT_EVENTS.claimed, workspaceId: ws.workspaceId, data: { subscription_id: neverCreated, claimed_at: systemMicros() } }],
        last?.revision ?? 'no_stream',
      );
      expect(await listed()).to.deep.equal([kept]);
      // A create could still be under way: the slots stay held for a while.
      expectLimitReached(await create(), 3);

      skew = 6 * 60 * 1_000_000;
      const freed = [await create(), await create()];
      expect(freed.map((r) => r.status)).to.deep.equal([201, 201]);
      expectLimitReached(await create(), 3);
      // The create that never came can no longer land: its stream is taken.
      const late = await runSubscriptionCommand(ts.service.core, ws.workspaceId, neverCreated, { kind: 'create', url: HOOK.url, events: [], description: '', secretEncrypted: 'sealed', at: '2026-01-01T00:00:00' }, undefined);
      expect(late._tag === 'Left' && late.left.code).to.equal('CONFLICT');
      expect((await log.readStream(subscriptionStream(neverCreated))).map((e) => e.type)).to.deep.equal(['webhook.subscription_abandoned']);
      expect(await listed()).to.have.members([kept, ...freed.map((r) => r.body.id)]);
    } finally {
      await ts.close();
    }
  });
});

describe('webhook subscription cap across two API processes on one log (e2e, processes)', function () {
  this.timeout(120_000);
  let dataDir: string;
  let group: ProcessGroup;

  beforeEach(() => {
    dataDir = mkdtempSync(path.join(tmpdir(), 'sp-cap-'));
    group = createProcessGroup({ DATA_DIR: dataDir, ADMIN_TOKEN, ROLE: 'api', WEBHOOK_MAX_SUBSCRIPTIONS: '20' });
  });

  afterEach(async function () {
    if (this.currentTest?.state === 'failed') console.log(group.outputs());
    await group.stopAll();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('grants exactly the cap to 50 concurrent creates spread over both', async () => {
    const [a, b] = await Promise.all([group.start('api-a', {}), group.start('api-b', {})]);
    const key = String((await call(`${a.url}/admin/v1/workspaces`, 'POST', ADMIN_TOKEN, { name: 'w' })).body.api_key);
    await eventually('the second process knows the key', async () => (await call(`${b.url}/api/v1/webhooks`, 'GET', key)).status === 200);

    const urls = [a.url, b.url];
    const replies = await Promise.all(Array.from({ length: 50 }, (_, i) => call(`${urls[i % 2]}/api/v1/webhooks`, 'POST', key, HOOK)));
    expect(statuses(replies)).to.deep.equal({ 201: 20, 422: 30 });
    replies.filter((r) => r.status === 422).forEach((r) => expectLimitReached(r, 20));
    const created = replies.filter((r) => r.status === 201).map((r) => r.body.id as string);
    for (const url of urls) {
      await eventually(`${url} lists all 20`, async () => ((await call(`${url}/api/v1/webhooks`, 'GET', key)).body.items as unknown[]).length === 20);
      expect(((await call(`${url}/api/v1/webhooks`, 'GET', key)).body.items as { id: string }[]).map((i) => i.id)).to.have.members(created);
    }
  });
});
