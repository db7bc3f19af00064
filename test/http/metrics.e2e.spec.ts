// GET /admin/v1/metrics: Prometheus' text format with the process figures the soak test samples,
// behind the admin token like the rest of the admin surface.
import { request } from 'node:http';
import { expect } from 'chai';
import { ADMIN_TOKEN, startTestService, type TestService } from '../support/server.js';

/** A POST on a connection of its own, which the server closes after its answer (a client without keep-alive). */
const postAlone = (url: string, path: string, token: string, body: unknown): Promise<{ status: number; body: Record<string, unknown>; closed: boolean }> =>
  new Promise((resolve, reject) => {
    const target = new URL(path, url);
    const req = request(
      { host: target.hostname, port: target.port, path: target.pathname, method: 'POST', agent: false, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', connection: 'close' } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.once('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as Record<string, unknown>, closed: res.headers.connection === 'close' }));
      },
    );
    req.once('error', reject);
    req.end(JSON.stringify(body));
  });

/** A counter's value in the metrics text (NaN when it is not there). */
const counterIn = (text: string, name: string): number => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);

describe('process metrics (e2e)', () => {
  let ts: TestService;
  before(async () => {
    ts = await startTestService();
  });
  after(() => ts.close());

  it('serves memory, heap, handles and event-loop delay to the admin token', async () => {
    const response = await fetch(`${ts.url}/admin/v1/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(response.status).to.equal(200);
    expect(response.headers.get('content-type')).to.match(/^text\/plain; version=0\.0\.4/);
    const text = await response.text();
    for (const name of ['process_resident_memory_bytes', 'nodejs_heap_size_used_bytes', 'nodejs_active_handles_total', 'nodejs_eventloop_lag_p99_seconds']) {
      expect(text).to.match(new RegExp(`^${name} \\d`, 'm'));
    }
    // The delivery thread's heap, which the process's heap figures leave out.
    expect(text).to.match(/^nodejs_worker_heap_size_used_bytes\{thread="webhook-dispatcher"\} [1-9]\d*$/m);
  });

  it("counts the log's commits and the writes they carried, under clients that open a connection per request", async () => {
    const metrics = async () => (await fetch(`${ts.url}/admin/v1/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).text();
    const ws = await ts.createWorkspace();
    const before = await metrics();
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) => postAlone(ts.url, '/api/v1/tickets', ws.apiKey, { contact: { email: `alone-${i}@example.com` }, subject: `Alone ${i}`, message: 'No keep-alive here.' })),
    );
    expect(answers.map((a) => a.status)).to.deep.equal(answers.map(() => 201));
    expect(answers.every((a) => a.closed), 'each connection closed after its answer').to.equal(true);
    const ids = new Set(answers.map((a) => String(a.body['id'])));
    expect(ids.size).to.equal(40);
    const listed = await ws.api('GET', '/api/v1/tickets?page_size=100');
    expect((listed.body as { items: { id: string }[] }).items.filter((t) => ids.has(t.id))).to.have.length(40);
    const after = await metrics();
    const commits = counterIn(after, 'event_log_commits_total') - counterIn(before, 'event_log_commits_total');
    const writes = counterIn(after, 'event_log_commit_writes_total') - counterIn(before, 'event_log_commit_writes_total');
    // Each ticket is at least one write (its contact, its count and itself: one commit where they can share it).
    expect(writes, 'writes').to.be.at.least(40);
    expect(commits, 'commits').to.be.within(1, writes);
  });

  it('is closed without the admin token', async () => {
    expect((await fetch(`${ts.url}/admin/v1/metrics`)).status).to.equal(401);
    expect((await fetch(`${ts.url}/admin/v1/metrics`, { headers: { authorization: 'Bearer sk_not_admin' } })).status).to.equal(401);
  });
});
