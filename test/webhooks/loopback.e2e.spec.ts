// A first webhook to a receiver on the developer's machine: refused by default with an answer that
// says which variable to set and to what, and delivered once the service starts with that value.
import { expect } from 'chai';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { startTestService, type TestService } from '../support/server.js';
import { subscribe } from '../support/webhooks-dispatch.js';

describe('webhooks to a receiver on 127.0.0.1 (e2e)', () => {
  let receiver: Receiver;
  let service: TestService | undefined;
  beforeEach(async () => {
    receiver = await startReceiver();
  });
  afterEach(async () => {
    await service?.close();
    await receiver.close();
  });

  const testDelivery = async (env: Record<string, string>) => {
    service = await startTestService(env);
    const ws = await service.createWorkspace();
    const { id } = await subscribe(ws, receiver.url);
    return (await ws.api('POST', `/api/v1/webhooks/${id}/test`)).body as { delivered: boolean; error: string | null };
  };

  it('is refused by default, and the error names WEBHOOK_ALLOWED_NETWORKS with the value that opens it', async () => {
    const answer = await testDelivery({ WEBHOOK_ALLOWED_NETWORKS: '' });
    expect(answer.delivered).to.equal(false);
    expect(answer.error).to.equal(
      'blocked address: 127.0.0.1 is a loopback, private, link-local or other internal address, refused unless WEBHOOK_ALLOWED_NETWORKS opens it: ' +
        'restart the service with WEBHOOK_ALLOWED_NETWORKS=127.0.0.1/32',
    );
    expect(receiver.requests).to.have.length(0);
  });

  it('is delivered once the service starts with the value the error gave', async () => {
    const answer = await testDelivery({ WEBHOOK_ALLOWED_NETWORKS: '127.0.0.1/32' });
    expect(answer).to.include({ delivered: true, error: null });
    expect(receiver.requests).to.have.length(1);
  });
});
