// Files of internal notes travel as signed links valid 12 hours (spec "Events" notes and "Limits"):
// `/api/media/<id>?expires=<unix s>&signature=<hex>`, HMAC-SHA256 under MEDIA_SIGNING_KEY, served
// without an API key. The test signs with the key itself, as the README documents the scheme, so it
// checks the service's signatures rather than trusting them. The link is made once, when the note is
// recorded: the webhook body, its retry, /updates and the REST message carry the same one.
import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { expect } from 'chai';
import { expectShortError, uniqueEmail } from '../support/tickets-fixtures.js';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { call, startTestService, type Reply, type TestService, type TestWorkspace } from '../support/server.js';
import { eventually, FAST_RETRIES, header, subscribe } from '../support/webhooks-dispatch.js';

const KEY = 'c0'.repeat(32);
const TWELVE_HOURS = 12 * 60 * 60;
const LINK = /^\/api\/media\/([0-9a-f]{32})\?expires=(\d+)&signature=([0-9a-f]{64})$/;
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64');

/** The signature as the README documents it. */
const sign = (key: string, mediaId: string, expires: number | string) =>
  createHmac('sha256', Buffer.from(key, 'hex')).update(`support-platform media link v1\n${mediaId}\n${expires}`).digest('hex');
const linkOf = (mediaId: string, expires: number, key = KEY) => `/api/media/${mediaId}?expires=${expires}&signature=${sign(key, mediaId, expires)}`;
const nowSeconds = () => Math.floor(Date.now() / 1000);

const upload = async (ts: TestService, ws: TestWorkspace, bytes: Uint8Array = PNG, name = 'screenshot.png', type = 'image/png'): Promise<string> => {
  const form = new FormData();
  form.append('file', new Blob([bytes], { type }), name);
  const response = await fetch(`${ts.url}/api/v1/media/upload`, { method: 'POST', headers: { authorization: `Bearer ${ws.apiKey}` }, body: form });
  expect(response.status).to.equal(201);
  return String(((await response.json()) as { id: string }).id);
};

/** A ticket with an internal note carrying the file; answers the note as the internal route gave it. */
const noteWith = async (ts: TestService, ws: TestWorkspace, mediaIds: readonly string[], isInternal = true): Promise<Reply> => {
  const ticket = await ws.api('POST', '/api/v1/tickets', { contact: { email: uniqueEmail() }, message: 'My screen is blank' });
  expect(ticket.status).to.equal(201);
  const note = await ts.admin('POST', `/internal/v1/workspaces/${ws.workspaceId}/tickets/${ticket.body.id}/messages`, {
    sender: 'operator',
    operator_id: 'op-1',
    operator_name: 'Ann',
    content: 'See the screenshot',
    media_ids: mediaIds,
    is_internal: isInternal,
  });
  expect(note.status, JSON.stringify(note.body)).to.equal(201);
  return note;
};

/** GET without any credential, as a chat client opens the link. */
const open = (ts: TestService, link: string) => call(`${ts.url}${link}`, 'GET', null);

describe('signed links to files of internal notes (e2e)', function () {
  this.timeout(30_000);
  let ts: TestService;
  let ws: TestWorkspace;
  let receiver: Receiver;

  before(async () => {
    ts = await startTestService({ MEDIA_SIGNING_KEY: KEY, ...FAST_RETRIES });
    ws = await ts.createWorkspace();
    receiver = await startReceiver();
  });
  after(async () => {
    await receiver.close();
    await ts.close();
  });

  it('signs an internal note\'s file for 12 hours when the note is recorded; the webhook body, its retry, /updates and the message carry that same link', async () => {
    const { secret } = await subscribe(ws, receiver.url, ['message.created']);
    // The note's first attempt fails (the ticket's first message is delivered too, and succeeds).
    let failed = false;
    receiver.respond((request) => {
      if (failed || !request.body.toString().includes('"is_internal":true')) return { kind: 'status', status: 200 };
      failed = true;
      return { kind: 'status', status: 500 };
    });
    const mediaId = await upload(ts, ws);
    const before = nowSeconds();
    const note = await noteWith(ts, ws, [mediaId]);
    const url = String(note.body.media[0].url);
    const [, linked, expires, signature] = LINK.exec(url) ?? [];
    expect(linked, url).to.equal(mediaId);
    expect(Number(expires)).to.be.within(before + TWELVE_HOURS, nowSeconds() + TWELVE_HOURS);
    expect(signature).to.equal(sign(KEY, mediaId, String(expires)));

    // The first attempt fails, the retry succeeds: both carry the bytes /updates serves.
    const attempts = await eventually('two attempts of the note', () => {
      const mine = receiver.requests.filter((r) => r.body.toString().includes(String(note.body.id)));
      return mine.length >= 2 && mine;
    });
    expect(attempts.map((a) => header(a, 'x-webhook-attempt'))).to.deep.equal(['1', '2']);
    expect(attempts[1]?.body.equals(attempts[0]?.body as Buffer)).to.equal(true);
    expect(header(attempts[0]!, 'x-webhook-signature')).to.equal(`sha256=${createHmac('sha256', secret).update(attempts[0]!.body).digest('hex')}`);
    const delivered = JSON.parse(attempts[0]!.body.toString());
    expect(delivered.data.is_internal).to.equal(true);
    expect(delivered.data.media.map((m: { url: string }) => m.url)).to.deep.equal([url]);

    const updates = await ws.api('GET', '/api/v1/updates?types=message.created&timeout=0');
    const item = updates.body.items.find((i: { id: string }) => i.id === delivered.id);
    const { offset, ...envelope } = item;
    expect(offset).to.be.a('number');
    expect(envelope).to.deep.equal(delivered);

    const messages = await ws.api('GET', `/api/v1/tickets/${note.body.ticket_id}/messages`);
    expect(messages.body.items.find((m: { id: string }) => m.id === note.body.id).media[0].url).to.equal(url);
  });

  it('keeps the chat-internal unsigned address for files of messages that are not internal', async () => {
    const mediaId = await upload(ts, ws);
    const reply = await noteWith(ts, ws, [mediaId], false);
    expect(reply.body.media.map((m: { url: string }) => m.url)).to.deep.equal([`/api/media/${mediaId}`]);
    expectShortError(await open(ts, `/api/media/${mediaId}`), 403);
  });

  it('serves the file by a valid link without an API key, inert like every download', async () => {
    const mediaId = await upload(ts, ws);
    const note = await noteWith(ts, ws, [mediaId]);
    const response = await fetch(`${ts.url}${note.body.media[0].url}`);
    expect(response.status).to.equal(200);
    expect(Buffer.from(await response.arrayBuffer()).equals(PNG)).to.equal(true);
    expect(response.headers.get('content-type')).to.equal('image/png');
    expect(response.headers.get('x-content-type-options')).to.equal('nosniff');
    expect(response.headers.get('content-security-policy')).to.include('sandbox');
    expect(response.headers.get('x-request-id')).to.be.a('string');
    // A link the test signed itself with the documented scheme serves too.
    expect((await open(ts, linkOf(mediaId, nowSeconds() + 60))).status).to.equal(200);
  });

  it('refuses an expired link with 403 in the short form', async () => {
    const mediaId = await upload(ts, ws);
    for (const expires of [nowSeconds() - 1, nowSeconds() - TWELVE_HOURS, 0]) {
      const refused = await open(ts, linkOf(mediaId, expires));
      expectShortError(refused, 403);
      expect(refused.body.detail).to.match(/expired/);
    }
  });

  it('refuses a tampered link with 403: signature, expiry, file, a missing or repeated part, another key', async () => {
    const mediaId = await upload(ts, ws);
    const other = await upload(ts, ws);
    const note = await noteWith(ts, ws, [mediaId]);
    const url = String(note.body.media[0].url);
    const [, , expires, signature] = LINK.exec(url) as RegExpExecArray;
    const flipped = `${signature!.slice(0, -1)}${signature!.endsWith('0') ? '1' : '0'}`;
    const tampered = [
      url.replace(signature!, flipped),
      url.replace(signature!, signature!.toUpperCase()),
      url.replace(`expires=${expires}`, `expires=${Number(expires) + 3600}`),
      url.replace(mediaId, other),
      `/api/media/${mediaId}?expires=${expires}`,
      `/api/media/${mediaId}?signature=${signature}`,
      `/api/media/${mediaId}`,
      `${url}&signature=${signature}`,
      `${url}&expires=${expires}`,
      url.replace(signature!, signature!.slice(0, 32)),
      linkOf(mediaId, nowSeconds() + 60, 'ab'.repeat(32)),
    ];
    for (const link of tampered) {
      const refused = await open(ts, link);
      expectShortError(refused, 403);
      expect(refused.body.detail, link).to.match(/not signed|altered/);
    }
    expect((await open(ts, url)).status).to.equal(200);
  });

  it('refuses another workspace\'s link: moved onto this workspace\'s file, or fetched with this workspace\'s key', async () => {
    const mine = await upload(ts, ws);
    const otherWs = await ts.createWorkspace();
    const theirs = await upload(ts, otherWs);
    const theirNote = await noteWith(ts, otherWs, [theirs]);
    const theirLink = String(theirNote.body.media[0].url);
    expect((await open(ts, theirLink)).status).to.equal(200);
    // Their signature does not carry over to my file.
    expectShortError(await open(ts, theirLink.replace(theirs, mine)), 403);
    // My API key does not open their file, with or without their signature.
    expectShortError(await ws.api('GET', `/api/v1/media/${theirs}`), 404);
    expectShortError(await ws.api('GET', `/api/v1/media/${theirs}${theirLink.slice(theirLink.indexOf('?'))}`), 404);
  });

  it('answers 404 for a malformed or unknown file id, whatever the signature, and 403 for a blocked project', async () => {
    expectShortError(await open(ts, linkOf('f'.repeat(32), nowSeconds() + 60)), 404);
    expectShortError(await open(ts, '/api/media/not-an-id?expires=1&signature=00'), 404);
    const blocked = await ts.createWorkspace();
    const mediaId = await upload(ts, blocked);
    await ts.admin('PATCH', `/admin/v1/workspaces/${blocked.workspaceId}`, { blocked: true });
    expectShortError(await open(ts, linkOf(mediaId, nowSeconds() + 60)), 403);
    await ts.admin('PATCH', `/admin/v1/workspaces/${blocked.workspaceId}`, { blocked: false });
    expect((await open(ts, linkOf(mediaId, nowSeconds() + 60))).status).to.equal(200);
  });

  it('without MEDIA_SIGNING_KEY, generates a key in the data folder (0600) that signs across restarts', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'sp-signing-'));
    try {
      let own = await startTestService({}, { dataDir });
      let link: string;
      try {
        const w = await own.createWorkspace();
        const note = await noteWith(own, w, [await upload(own, w)]);
        link = String(note.body.media[0].url);
        expect((await open(own, link)).status).to.equal(200);
      } finally {
        await own.close();
      }
      expect(statSync(path.join(dataDir, 'media-signing.key')).mode & 0o777).to.equal(0o600);
      own = await startTestService({}, { dataDir });
      try {
        expect((await open(own, link)).status).to.equal(200);
      } finally {
        await own.close();
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
