// Hostile uploads against the real server, sent byte for byte: duplicate parts, truncated and
// abandoned bodies, stalled bodies, oversize declarations. Every request is answered or closed, and
// afterwards no descriptor is open on a media file and no partial file is left in the media folder.
import { expect } from 'chai';
import fc from 'fast-check';
import { readdirSync, readlinkSync, statSync } from 'node:fs';
import * as path from 'node:path';
import { filesUnder } from '../support/files.js';
import { multipart, postHead, rawRequest, type RawAnswer } from '../support/raw-http.js';
import { startTestService, type TestService, type TestWorkspace } from '../support/server.js';

const LIMIT = 256 * 1024;
const BOUNDARY = 'abuse-boundary-7';
const UPLOAD = '/api/v1/media/upload';

const fileHeaders = (name = 'file', fileName: string | null = 'a.bin', type: string | null = 'application/octet-stream') =>
  [`Content-Disposition: form-data; name="${name}"${fileName === null ? '' : `; filename="${fileName}"`}`, ...(type === null ? [] : [`Content-Type: ${type}`])].join('\r\n');

/** Descriptors this process holds on files under `dir` (the server runs in this process). */
const descriptorsUnder = (dir: string): string[] =>
  readdirSync('/proc/self/fd').flatMap((fd) => {
    try {
      const target = readlinkSync(`/proc/self/fd/${fd}`);
      return target.startsWith(dir) ? [target] : [];
    } catch {
      return []; // closed while listing
    }
  });

const eventually = async (check: () => void, ms = 5_000) => {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      check();
      return;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }
};

describe('media uploads under abuse (e2e)', function () {
  this.timeout(60_000);
  let ts: TestService;
  let ws: TestWorkspace;
  let mediaDir: string;

  before(async () => {
    ts = await startTestService({ MEDIA_MAX_BYTES: String(LIMIT), HTTP_HEADERS_TIMEOUT_MS: '1000', HTTP_REQUEST_TIMEOUT_MS: '1500' });
    ws = await ts.createWorkspace();
    mediaDir = path.join(ts.dataDir, 'media');
  });
  after(() => ts.close());

  /** After each case: nothing open on, and nothing partial in, the media folder. */
  const expectNothingLeft = () =>
    eventually(() => {
      expect(descriptorsUnder(mediaDir), 'descriptors on media files').to.deep.equal([]);
      expect(filesUnder(mediaDir).filter((f) => f.endsWith('.part')), 'partial files').to.deep.equal([]);
    });

  const send = (body: Buffer, extra: Record<string, string | number> = {}) =>
    rawRequest(ts.url, {
      parts: [postHead(UPLOAD, { Authorization: `Bearer ${ws.apiKey}`, 'Content-Type': `multipart/form-data; boundary=${BOUNDARY}`, 'Content-Length': body.length, ...extra }), body],
    });

  const expectProblem = (answer: RawAnswer, status: number, msg: RegExp) => {
    expect(answer.status, answer.body).to.equal(status);
    expect(answer.headers['x-request-id']).to.be.a('string');
    expect(JSON.parse(answer.body).detail[0].msg).to.match(msg);
  };

  it('answers two file parts of 40 KB each with 422, 50 times at once, and leaves nothing behind', async () => {
    const body = multipart(BOUNDARY, [
      [fileHeaders('file', 'a.bin'), Buffer.alloc(40 * 1024, 1)],
      [fileHeaders('file', 'b.bin'), Buffer.alloc(40 * 1024, 2)],
    ]);
    const answers = await Promise.all(Array.from({ length: 50 }, () => send(body)));
    for (const answer of answers) expectProblem(answer, 422, /More than one part named "file"/);
    await expectNothingLeft();
    expect(filesUnder(mediaDir)).to.deep.equal([]);
  });

  it('answers a body cut before its closing boundary with 422 and stores nothing', async () => {
    const body = multipart(BOUNDARY, [[fileHeaders(), Buffer.alloc(10_000, 3)]], false);
    expectProblem(await send(body), 422, /Malformed multipart body/);
    await expectNothingLeft();
  });

  it('gives a part without filename, an empty file and a part without Content-Type their own outcomes', async () => {
    expectProblem(await send(multipart(BOUNDARY, [[fileHeaders('file', null, null), 'just text']])), 422, /form field, not a file/);

    const empty = await send(multipart(BOUNDARY, [[fileHeaders('file', 'empty.txt', 'text/plain'), '']]));
    expect(empty.status, empty.body).to.equal(201);
    expect(JSON.parse(empty.body)).to.include({ size: 0, file_name: 'empty.txt', content_type: 'text/plain' });

    const untyped = await send(multipart(BOUNDARY, [[fileHeaders('file', 'data.bin', null), 'abc']]));
    expect(untyped.status, untyped.body).to.equal(201);
    expect(JSON.parse(untyped.body)).to.include({ size: 3, content_type: 'application/octet-stream' });

    const crowded = multipart(BOUNDARY, [
      ['Content-Disposition: form-data; name="note"', 'x'.repeat(70 * 1024)],
      [fileHeaders(), 'abc'],
    ]);
    expectProblem(await send(crowded), 422, /Parts other than "file" exceed 65536 bytes/);
    await expectNothingLeft();
  });

  it('cleans up after clients that walk away at any point of an upload', async () => {
    const body = multipart(BOUNDARY, [
      ['Content-Disposition: form-data; name="note"', 'hello'],
      [fileHeaders(), Buffer.alloc(120 * 1024, 5)],
    ]);
    const head = postHead(UPLOAD, { Authorization: `Bearer ${ws.apiKey}`, 'Content-Type': `multipart/form-data; boundary=${BOUNDARY}`, 'Content-Length': body.length });
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: 1, max: body.length - 1 }), { minLength: 1, maxLength: 8 }), async (cuts) => {
        await Promise.all(cuts.map((cut) => rawRequest(ts.url, { parts: [head, body.subarray(0, cut), () => new Promise((r) => setTimeout(r, 20))], abandon: true })));
        await expectNothingLeft();
      }),
      { numRuns: 25 },
    );
  });

  it('cuts a stalled body at the request deadline with 408 and leaves nothing behind', async () => {
    const body = multipart(BOUNDARY, [[fileHeaders(), Buffer.alloc(100 * 1024, 6)]]);
    const head = postHead(UPLOAD, { Authorization: `Bearer ${ws.apiKey}`, 'Content-Type': `multipart/form-data; boundary=${BOUNDARY}`, 'Content-Length': body.length });
    const stalled = await rawRequest(ts.url, { parts: [head, body.subarray(0, 50 * 1024)], waitMs: 15_000 });
    expect(stalled.status, stalled.body).to.equal(408);
    expect(stalled.headers['connection']).to.equal('close');
    expect(stalled.elapsedMs).to.be.below(8_000);
    expect(JSON.parse(stalled.body)).to.deep.equal({ detail: 'Request Timeout: the request could not be read as HTTP' });
    expect(stalled.headers['x-request-id']).to.be.a('string');
    await expectNothingLeft();
  });

  it('stops a chunked upload at the limit with 413, and the partial file never grows past it', async () => {
    let largest = 0;
    const watch = setInterval(() => {
      for (const f of filesUnder(mediaDir).filter((n) => n.endsWith('.part'))) largest = Math.max(largest, statSync(f, { throwIfNoEntry: false })?.size ?? 0);
    }, 5);
    try {
      const chunk = (data: Buffer) => `${data.length.toString(16)}\r\n${data.toString('latin1')}\r\n`;
      const opening = Buffer.from(`--${BOUNDARY}\r\n${fileHeaders()}\r\n\r\n`);
      const slice = Buffer.alloc(64 * 1024, 7);
      const answer = await rawRequest(ts.url, {
        parts: [
          postHead(UPLOAD, { Authorization: `Bearer ${ws.apiKey}`, 'Content-Type': `multipart/form-data; boundary=${BOUNDARY}`, 'Transfer-Encoding': 'chunked' }),
          chunk(opening),
          ...Array.from({ length: 12 }, () => Buffer.from(chunk(slice), 'latin1')),
        ],
      });
      expect(answer.status, answer.body).to.equal(413);
      expect(JSON.parse(answer.body)).to.include({ error_code: 'MEDIA_TOO_LARGE' });
    } finally {
      clearInterval(watch);
    }
    expect(largest).to.be.at.most(LIMIT);
    await expectNothingLeft();
  });
});

describe('media uploads above the default limit (e2e)', () => {
  let ts: TestService;
  before(async () => {
    ts = await startTestService();
  });
  after(() => ts.close());

  it('refuses a declared 201 MiB upload with 413 before reading its body, and closes the connection', async () => {
    const ws = await ts.createWorkspace();
    const answer = await rawRequest(ts.url, {
      parts: [postHead(UPLOAD, { Authorization: `Bearer ${ws.apiKey}`, 'Content-Type': `multipart/form-data; boundary=${BOUNDARY}`, 'Content-Length': 201 * 1024 * 1024 })],
      waitMs: 5_000,
    });
    expect(answer.status).to.equal(413);
    expect(JSON.parse(answer.body)).to.include({ error_code: 'MEDIA_TOO_LARGE', error_message: `File is larger than the limit of ${200 * 1024 * 1024} bytes` });
    expect(answer.headers['connection']).to.equal('close');
    expect(filesUnder(path.join(ts.dataDir, 'media'))).to.deep.equal([]);
  });
});
