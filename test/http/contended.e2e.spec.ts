// A command whose stream stayed contended past the bound is answered 503 SERVICE_UNAVAILABLE in the
// business envelope with Retry-After, never a 500 (the one error middleware renders it).
import { expect } from 'chai';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import { StreamContended } from '../../src/app/command-handler.js';
import { errors } from '../../src/http/middleware/errors.js';
import { requestId } from '../../src/http/middleware/request-id.js';

describe('a contended stream over HTTP (e2e)', () => {
  it('answers 503 SERVICE_UNAVAILABLE with Retry-After: 1', async () => {
    const app = new Koa();
    app.silent = true;
    app.use(requestId());
    app.use(errors());
    app.use(() => {
      throw new StreamContended('ticket-1');
    });
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    try {
      const response = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`, { headers: { 'x-request-id': 'req-42' } });
      expect(response.status).to.equal(503);
      expect(response.headers.get('retry-after')).to.equal('1');
      expect(await response.json()).to.deep.equal({
        error_code: 'SERVICE_UNAVAILABLE',
        error_message: 'This record is being changed elsewhere right now: retry shortly',
        detail: null,
        request_id: 'req-42',
      });
    } finally {
      server.close();
    }
  });
});
