import { createMemoryNotifier } from '../../src/updates/memory.js';
import { notifierContract } from './notifier.contract.js';

notifierContract('in-process', async () => {
  const notifier = createMemoryNotifier();
  return { publisher: notifier, subscriber: notifier, teardown: () => notifier.close() };
});
