// The embedded RetrySchedule against the contract every adapter passes.
import { createMemoryRetrySchedule } from '../../src/webhooks/dispatch/retry-schedule/memory.js';
import { retryScheduleContract } from './retry-schedule.contract.js';

retryScheduleContract('memory', async () => {
  const schedule = createMemoryRetrySchedule();
  return { schedule, other: schedule, teardown: async () => undefined };
});
