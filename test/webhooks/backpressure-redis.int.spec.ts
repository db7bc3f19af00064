// The distributed mode's backpressure over Redis pub/sub (src/webhooks/dispatch/backpressure-redis.ts):
// a dispatcher's presses reach every API server listening, each dispatcher's apart (one that stops
// does not release another's), they run out when not renewed, a message cannot hold for more than a
// second, and a Redis that is away presses nothing and throws nothing.
import { expect } from 'chai';
import { listenForPressure, redisPress } from '../../src/webhooks/dispatch/backpressure-redis.js';
import { createRedisClient, redisReady } from '../../src/shared/redis.js';
import { eventually, settle } from '../support/webhooks-dispatch.js';

const redisUrl = process.env['REDIS_URL'];

(redisUrl === undefined ? describe.skip : describe)('webhook delivery backpressure over Redis (int)', () => {
  const url = redisUrl as string;
  let channelPrefix: string;
  const opened: { close(): void }[] = [];
  const open = <T extends { close(): void }>(made: T): T => {
    opened.push(made);
    return made;
  };
  /** An API server's listener, once subscribed. */
  const listener = async () => {
    const made = open(listenForPressure({ url, channelPrefix }));
    await made.subscribed;
    return made;
  };
  /** A dispatcher's press, once its connection takes commands (a command connection drops what comes before). */
  const dispatcher = async () => {
    const made = open(redisPress({ url, channelPrefix }));
    await made.ready;
    return made;
  };

  beforeEach(() => {
    channelPrefix = `test:${Math.random().toString(16).slice(2)}:`;
  });
  afterEach(() => {
    for (const c of opened.splice(0)) c.close();
  });

  it('holds every listening API server while a dispatcher presses, and none once it says it stopped', async () => {
    const [a, b] = [await listener(), await listener()];
    const one = await dispatcher();
    one.press(500);
    await eventually('both API servers pressed', () => a.read() > Date.now() && b.read() > Date.now());
    expect(a.read() - Date.now()).to.be.within(1, 500);
    one.press(0);
    await eventually('both released', () => a.read() === 0 && b.read() === 0);
  });

  it('keeps each dispatcher apart: one that stops does not release another', async () => {
    const api = await listener();
    const [one, two] = [await dispatcher(), await dispatcher()];
    one.press(800);
    two.press(800);
    await eventually('pressed by both', () => api.read() > Date.now());
    one.press(0);
    await settle(100);
    expect(api.read(), 'the second still presses').to.be.greaterThan(Date.now());
    two.press(0);
    await eventually('released by both', () => api.read() === 0);
  });

  it('runs out when not renewed, and caps a message at one second', async () => {
    const api = await listener();
    const one = await dispatcher();
    one.press(60);
    await eventually('pressed', () => api.read() > Date.now());
    await eventually('run out without a release', () => api.read() === 0, 2_000);
    // A message from anyone on the channel: a huge hold is cut to a second, garbage is ignored.
    const raw = createRedisClient(url, 'command');
    try {
      await redisReady(raw);
      await raw.publish(`${channelPrefix}webhook-backpressure`, 'someone 3600000');
      await raw.publish(`${channelPrefix}webhook-backpressure`, 'x -5');
      await raw.publish(`${channelPrefix}webhook-backpressure`, 'nospace');
      await raw.publish(`${channelPrefix}webhook-backpressure`, ' 500');
      await eventually('pressed by the huge one', () => api.read() > Date.now());
      expect(api.read() - Date.now()).to.be.at.most(1_000);
      await eventually('run out within its second', () => api.read() === 0, 3_000);
    } finally {
      raw.disconnect();
    }
  });

  it('presses nothing and throws nothing while Redis cannot be reached', async () => {
    const api = open(listenForPressure({ url: 'redis://127.0.0.1:1', channelPrefix }));
    const one = open(redisPress({ url: 'redis://127.0.0.1:1', channelPrefix }));
    one.press(500);
    await settle(100);
    expect(api.read()).to.equal(0);
    api.clear();
  });
});
