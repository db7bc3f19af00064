// A write whose answer cannot be read because the read models' store went away after the append
// (Redis, in the distributed mode) is not answered 503, which tells a client nothing was written:
// without an Idempotency-Key it is a 500 (the request was carried out, read to see it); with one the
// 503 stands and the retry under the same key finishes the request and answers it, acting once.
// An API server (ROLE=api) on a private Redis that this file stops just after the ticket's append.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import type { EventLog } from '../../src/log/event-log.js';
import { redisServerInstalled, startPrivateRedis, type PrivateRedis } from '../support/redis-server.js';
import { startTestService, type TestService, type TestWorkspace } from '../support/server.js';
import { uniqueEmail } from '../support/tickets-fixtures.js';

/**
 * Stops Redis once the next append to a ticket stream has landed (alone, or with its quota count in
 * one appendAll), before the route reads its answer.
 */
const stopRedisAfterTicketAppend = (log: EventLog, redis: PrivateRedis): void => {
  let armed = true;
  const stopAfter = async <T>(streams: readonly string[], appended: T): Promise<T> => {
    if (armed && streams.some((stream) => /^ticket-[0-9a-f]{32}$/.test(stream))) {
      armed = false;
      await redis.stop();
    }
    return appended;
  };
  const append = log.append.bind(log);
  log.append = async (stream, events, expected) => stopAfter([stream], await append(stream, events, expected));
  const appendAll = log.appendAll?.bind(log);
  if (appendAll !== undefined) log.appendAll = async (parts) => stopAfter(parts.map((part) => part.stream), await appendAll(parts));
};

describe('a write whose answer cannot be read (e2e, private Redis)', function () {
  this.timeout(60_000);
  let redis: PrivateRedis;
  let ts: TestService;
  let ws: TestWorkspace;

  before(async function () {
    if (!redisServerInstalled()) this.skip();
    redis = await startPrivateRedis();
    ts = await startTestService({ ROLE: 'api', REDIS_URL: redis.url });
    ws = await ts.createWorkspace('business');
  });
  after(async () => {
    await ts?.close();
    await redis?.stop();
  });

  const createdWith = async (subject: string) =>
    (await ts.service.core.log.readAll({ after: 0, types: ['ticket.created'], workspaceId: ws.workspaceId })).filter((e) => e.data['subject'] === subject);
  const storeBack = async () => {
    await redis.start();
    for (let i = 0; i < 200 && (await ws.api('GET', '/api/v1/tickets')).status !== 200; i++) await new Promise((r) => setTimeout(r, 50));
  };

  it('answers 500, not 503, without an Idempotency-Key', async () => {
    const subject = `Unanswered ${randomUUID()}`;
    stopRedisAfterTicketAppend(ts.service.core.log, redis);
    const answer = await ws.api('POST', '/api/v1/tickets', { contact: { email: uniqueEmail() }, subject, message: 'Hello' });
    expect(answer.status, JSON.stringify(answer.body)).to.equal(500);
    expect(answer.body.error_code).to.equal('INTERNAL_ERROR');
    expect(answer.body.error_message).to.match(/carried out/);
    expect(answer.headers.get('retry-after')).to.equal(null);
    expect(await createdWith(subject)).to.have.length(1);
    await storeBack();
  });

  it('answers 503 with a key, and the retry under the key answers the ticket it made, once', async () => {
    const subject = `Resumed ${randomUUID()}`;
    const body = { contact: { email: uniqueEmail() }, subject, message: 'Hello' };
    stopRedisAfterTicketAppend(ts.service.core.log, redis);
    const first = await ws.api('POST', '/api/v1/tickets', body, { 'idempotency-key': 'unanswered-1' });
    expect(first.status, JSON.stringify(first.body)).to.equal(503);
    await storeBack();
    const retried = await ws.api('POST', '/api/v1/tickets', body, { 'idempotency-key': 'unanswered-1' });
    expect(retried.status, JSON.stringify(retried.body)).to.equal(201);
    const created = await createdWith(subject);
    expect(created).to.have.length(1);
    expect(retried.body.id).to.equal(created[0]?.stream.slice('ticket-'.length));
  });
});
