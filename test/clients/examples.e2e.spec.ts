// The README's "receive your first webhook" and "poll your first update" programs of each language
// (clients/*/examples, included verbatim in the README), run against a running service.
import { expect } from 'chai';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { LANGUAGES, buildGo, example, startProgram, type Running } from '../support/client-helpers.js';
import { startTestService, type TestService, type TestWorkspace } from '../support/server.js';
import { subscribe } from '../support/webhooks-dispatch.js';

const README = readFileSync(path.resolve(import.meta.dirname, '../../README.md'), 'utf8');
const EXAMPLE_FILES = LANGUAGES.flatMap((language) =>
  ['receive', 'poll'].map((name) =>
    language === 'go' ? `clients/go/examples/${name}/main.go` : `clients/${language}/examples/${name}.${language === 'python' ? 'py' : 'ts'}`,
  ),
);

describe('client helpers: the README example programs against a running service (e2e)', function () {
  this.timeout(180_000);
  let test: TestService;
  let ws: TestWorkspace;
  let dir: string;
  let goBinaries: Record<string, string>;
  const running: Running[] = [];
  const start = (...args: Parameters<typeof startProgram>): Running => {
    const program = startProgram(...args);
    running.push(program);
    return program;
  };

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'sp-examples-'));
    goBinaries = await buildGo(dir, './examples/receive', './examples/poll');
    test = await startTestService();
    ws = await test.createWorkspace();
  });
  afterEach(async () => {
    await Promise.all(running.splice(0).map((p) => p.stop()));
  });
  after(async () => {
    await test?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('the README holds every example program verbatim', () => {
    for (const file of EXAMPLE_FILES) {
      expect(README.includes(readFileSync(path.resolve(import.meta.dirname, '../..', file), 'utf8')), `${file} in README.md`).to.equal(true);
    }
  });

  it('each receive program prints the ticket a running service delivers, and refuses a forged delivery with 401', async () => {
    const receivers = await Promise.all(
      LANGUAGES.map(async (language) => {
        // The secret comes with the subscription, and the program needs it to start: subscribe first, point the URL at it after.
        const { id, secret } = await subscribe(ws, 'http://127.0.0.1:9/not-yet', ['ticket.created']);
        const program = start(example(language, 'receive', goBinaries), { WEBHOOK_SECRET: secret, PORT: '0' });
        const url = (/http:\/\/\S+/.exec(await program.line(/^listening on /)) as RegExpExecArray)[0];
        const patched = await ws.api('PATCH', `/api/v1/webhooks/${id}`, { url });
        expect(patched.status).to.equal(200);
        return { language, program, url };
      }),
    );
    const created = await ws.api('POST', '/api/v1/tickets', { subject: 'Первый тикет ✓', contact: { email: 'first@example.com' } });
    expect(created.status).to.equal(201);
    const ticketId = String(created.body.id);
    for (const { language, program, url } of receivers) {
      const printed = await program.line(/^ticket\.created /);
      expect(printed, language).to.match(/^ticket\.created [0-9a-f]{32}$/);
      expect(program.lines, language).to.include(`new ticket ${ticketId}: Первый тикет ✓`);

      const forged = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'webhook-id': 'x', 'webhook-timestamp': String(Math.floor(Date.now() / 1000)), 'webhook-signature': 'v1,AAAA' },
        body: '{}',
      });
      expect(forged.status, language).to.equal(401);
      expect(await program.line(/^refused: /), language).to.match(/matches the secrets/);
    }
  });

  it('each poll program prints the first event of the workspace with its offset', async () => {
    const first = await ws.api('GET', '/api/v1/updates?offset=0&limit=1&timeout=0');
    const event = first.body.items[0] as { offset: number; type: string; id: string };
    for (const language of LANGUAGES) {
      const program = start(example(language, 'poll', goBinaries), { API_URL: test.url, API_KEY: ws.apiKey });
      expect(await program.line(/^\d+ /), language).to.equal(`${event.offset} ${event.type} ${event.id}`);
    }
  });

  it('each poll program stops with the 401 when the key is wrong, without retrying it', async () => {
    for (const language of LANGUAGES) {
      const program = start(example(language, 'poll', goBinaries), { API_URL: test.url, API_KEY: 'sk_wrong' });
      expect(await program.exited, language).to.not.equal(0);
      expect(program.lines.join('\n'), language).to.match(/answered 401/);
    }
  });
});
