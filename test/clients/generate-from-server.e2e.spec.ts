// npm run clients:generate -- --from URL: a running server's GET /api/v1/event-types gives the same
// files as the code that serves it.
import { expect } from 'chai';
import { eventTypes } from '../../src/openapi/document.js';
import { fetchEventTypes, generatedFiles } from '../../scripts/clients/generate.js';
import { startReceiver } from '../support/receiver.js';
import { startTestService } from '../support/server.js';

describe('client helpers: generated from a running server (e2e)', function () {
  this.timeout(60_000);

  it('the served event schemas generate the same files as the serving code', async () => {
    const test = await startTestService();
    try {
      expect(generatedFiles(await fetchEventTypes(test.url))).to.deep.equal(generatedFiles(eventTypes().items));
    } finally {
      await test.close();
    }
  });

  it('an address that does not serve the event types stops generation, naming the answer', async () => {
    const other = await startReceiver();
    other.respond({ kind: 'status', status: 404 });
    try {
      let error: unknown;
      await fetchEventTypes(other.url).catch((e: unknown) => (error = e));
      expect(String(error)).to.match(/event-types answered 404/);
    } finally {
      await other.close();
    }
  });
});
