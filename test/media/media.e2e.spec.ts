// Media upload and download against the real server: streaming into the filesystem store, the size
// limit (413), storage failure (502), other workspaces' files (404) and a workspace bucket (302).
import { expect } from 'chai';
import { mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { filesUnder } from '../support/files.js';
import { startTestService, type TestService, type TestWorkspace } from '../support/server.js';

const LIMIT = 1024;

/** POSTs a multipart form (the JSON helper of test/support/server.ts cannot). */
const postForm = async (url: string, ws: TestWorkspace, form: FormData) => {
  const response = await fetch(`${url}/api/v1/media/upload`, { method: 'POST', headers: { authorization: `Bearer ${ws.apiKey}` }, body: form });
  return { status: response.status, headers: response.headers, body: (await response.json()) as Record<string, any> };
};

let baseUrl = '';

const upload = (ws: TestWorkspace, bytes: Uint8Array, fileName = 'note.txt', type = 'text/plain') => {
  const form = new FormData();
  form.append('file', new Blob([bytes], { type }), fileName);
  return postForm(baseUrl, ws, form);
};

const until = async (condition: () => boolean) => {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 10));
};

describe('media (e2e)', () => {
  let ts: TestService;
  let ws: TestWorkspace;
  let mediaDir: string;

  before(async () => {
    ts = await startTestService({ MEDIA_MAX_BYTES: String(LIMIT) });
    ws = await ts.createWorkspace();
    mediaDir = path.join(ts.dataDir, 'media');
    baseUrl = ts.url;
  });
  after(() => ts.close());

  it('stores an upload, records media.uploaded and serves the bytes back', async () => {
    const bytes = new Uint8Array(LIMIT).map((_, i) => i % 251);
    const created = await upload(ws, bytes, 'report.pdf', 'application/pdf');
    expect(created.status).to.equal(201);
    const id = String(created.body.id);
    expect(created.body).to.deep.equal({ id, file_name: 'report.pdf', content_type: 'application/pdf', size: LIMIT, url: `/api/media/${id}` });

    const events = await ts.service.core.log.readStream(`media-${id}`);
    expect(events.map((e) => [e.type, e.workspaceId])).to.deep.equal([['media.uploaded', ws.workspaceId]]);
    expect(events[0]?.data).to.deep.equal({ media_id: id, file_name: 'report.pdf', content_type: 'application/pdf', size: LIMIT, url: `/api/media/${id}` });

    const response = await fetch(`${ts.url}/api/v1/media/${id}`, { headers: { authorization: `Bearer ${ws.apiKey}` } });
    expect(response.status).to.equal(200);
    expect(response.headers.get('content-type')).to.equal('application/pdf');
    expect(response.headers.get('x-request-id')).to.be.a('string');
    expect(new Uint8Array(await response.arrayBuffer())).to.deep.equal(bytes);
  });

  it('answers 413 MEDIA_TOO_LARGE one byte above the limit and leaves no partial file', async () => {
    const before = filesUnder(mediaDir).length;
    const refused = await upload(ws, new Uint8Array(LIMIT + 1));
    expect(refused.status).to.equal(413);
    expect(refused.body).to.include({ error_code: 'MEDIA_TOO_LARGE', request_id: refused.headers.get('x-request-id') });
    expect(filesUnder(mediaDir)).to.have.length(before);
  });

  it('stops a much larger upload with 413 and the connection still answers', async () => {
    const refused = await upload(ws, new Uint8Array(4 * 1024 * 1024));
    expect(refused.status).to.equal(413);
    expect((await upload(ws, new Uint8Array(10))).status).to.equal(201);
  });

  it('streams into the store while the upload is still arriving', async () => {
    const big = await startTestService({ MEDIA_MAX_BYTES: String(64 * 1024 * 1024) });
    try {
      const bigWs = await big.createWorkspace();
      const boundary = 'x-boundary-42';
      const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`);
      const chunk = Buffer.alloc(1024 * 1024, 7);
      let release: () => void = () => undefined;
      const released = new Promise<void>((resolve) => (release = resolve));
      const body = new ReadableStream<Uint8Array>({
        async start(controller) {
          controller.enqueue(head);
          controller.enqueue(chunk);
          await released; // the rest is held back until the first megabyte is on disk
          controller.enqueue(chunk);
          controller.enqueue(Buffer.from(`\r\n--${boundary}--\r\n`));
          controller.close();
        },
      });
      const request = fetch(`${big.url}/api/v1/media/upload`, {
        method: 'POST',
        headers: { authorization: `Bearer ${bigWs.apiKey}`, 'content-type': `multipart/form-data; boundary=${boundary}` },
        body,
        duplex: 'half',
      } as RequestInit);
      const dir = path.join(big.dataDir, 'media');
      await until(() => filesUnder(dir).some((f) => f.endsWith('.part') && statSync(f).size > 0));
      release();
      const response = await request;
      expect(response.status).to.equal(201);
      expect(await response.json()).to.include({ size: 2 * chunk.length, file_name: 'big.bin' });
      expect(filesUnder(dir).filter((f) => f.endsWith('.part'))).to.deep.equal([]);
    } finally {
      await big.close();
    }
  });

  it('answers 404 (short form) for unknown, malformed and other workspaces\' ids', async () => {
    const created = await upload(ws, new Uint8Array([1, 2, 3]));
    const other = await ts.createWorkspace();
    for (const [caller, id] of [
      [other, created.body.id],
      [ws, '0'.repeat(32)],
      [ws, 'not-an-id'],
    ] as const) {
      const reply = await caller.api('GET', `/api/v1/media/${id}`);
      expect(reply.status).to.equal(404);
      expect(reply.body).to.deep.equal({ detail: 'File not found' });
    }
  });

  it('refuses a request without the file part or not multipart (422)', async () => {
    const form = new FormData();
    form.append('other', 'text');
    const missing = await postForm(ts.url, ws, form);
    expect(missing.status).to.equal(422);
    expect(missing.body.detail[0]).to.include({ type: 'missing' });
    const json = await ws.api('POST', '/api/v1/media/upload', { file: 'abc' });
    expect(json.status).to.equal(422);
    expect(json.body.detail).to.be.an('array');
  });

  it('redirects to the workspace bucket while one is configured', async () => {
    const created = await upload(ws, new Uint8Array([9]));
    const id = String(created.body.id);
    const set = await ts.admin('PUT', `/internal/v1/workspaces/${ws.workspaceId}/media-bucket`, { base_url: 'https://files.example.com/acme/' });
    expect(set.status).to.equal(200);
    const redirected = await fetch(`${ts.url}/api/v1/media/${id}`, { headers: { authorization: `Bearer ${ws.apiKey}` }, redirect: 'manual' });
    expect(redirected.status).to.equal(302);
    expect(redirected.headers.get('location')).to.equal(`https://files.example.com/acme/${id}`);
    expect(await redirected.text()).to.equal('');
    await ts.admin('PUT', `/internal/v1/workspaces/${ws.workspaceId}/media-bucket`, { base_url: null });
    expect((await ws.api('GET', `/api/v1/media/${id}`)).status).to.equal(200);
  });

  it('answers 502 MEDIA_UPLOAD_FAILED when the store cannot write', async () => {
    const broken = await ts.createWorkspace();
    // A plain file where the workspace's folder should be: every write below it fails.
    mkdirSync(mediaDir, { recursive: true });
    writeFileSync(path.join(mediaDir, broken.workspaceId), 'not a folder');
    try {
      const failed = await upload(broken, new Uint8Array(100));
      expect(failed.status).to.equal(502);
      expect(failed.body).to.include({ error_code: 'MEDIA_UPLOAD_FAILED', request_id: failed.headers.get('x-request-id') });
    } finally {
      rmSync(path.join(mediaDir, broken.workspaceId));
    }
  });
});
