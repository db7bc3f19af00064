// One contract for every Notifier adapter.
import { expect } from 'chai';
import type { Notifier } from '../../src/updates/notifier.js';

export interface NotifierFixture {
  /** Two notifiers sharing one channel (the same object for an in-process adapter). */
  readonly publisher: Notifier;
  readonly subscriber: Notifier;
  teardown(): Promise<void>;
}

const waitFor = async (check: () => boolean, ms = 5000) => {
  const until = Date.now() + ms;
  while (!check()) {
    if (Date.now() > until) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 5));
  }
};

export const notifierContract = (name: string, factory: (() => Promise<NotifierFixture>) | null) => {
  describe(`Notifier contract: ${name}`, () => {
    if (factory === null) {
      it('runs when its engine is configured');
      return;
    }
    let fixture: NotifierFixture;
    beforeEach(async () => {
      fixture = await factory();
    });
    afterEach(() => fixture.teardown());

    it('delivers announcements to the listeners of that workspace only', async () => {
      const a: number[] = [];
      const b: number[] = [];
      fixture.subscriber.subscribe('wa', (o) => a.push(o));
      fixture.subscriber.subscribe('wb', (o) => b.push(o));
      await new Promise((r) => setTimeout(r, 50));
      await fixture.publisher.publish('wa', 1);
      await fixture.publisher.publish('wa', 2);
      await waitFor(() => a.length === 2);
      expect(a).to.deep.equal([1, 2]);
      expect(b).to.deep.equal([]);
    });

    it('stops calling a listener once unsubscribed', async () => {
      const got: number[] = [];
      const off = fixture.subscriber.subscribe('w', (o) => got.push(o));
      const other: number[] = [];
      fixture.subscriber.subscribe('w', (o) => other.push(o));
      await new Promise((r) => setTimeout(r, 50));
      off();
      await fixture.publisher.publish('w', 7);
      await waitFor(() => other.length === 1);
      expect(got).to.deep.equal([]);
    });
  });
};
