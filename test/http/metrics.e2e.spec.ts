// GET /admin/v1/metrics: Prometheus' text format with the process figures the soak test samples,
// behind the admin token like the rest of the admin surface.
import { expect } from 'chai';
import { ADMIN_TOKEN, startTestService, type TestService } from '../support/server.js';

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

  it('is closed without the admin token', async () => {
    expect((await fetch(`${ts.url}/admin/v1/metrics`)).status).to.equal(401);
    expect((await fetch(`${ts.url}/admin/v1/metrics`, { headers: { authorization: 'Bearer sk_not_admin' } })).status).to.equal(401);
  });
});
