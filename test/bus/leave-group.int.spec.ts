// Removing a group member on its behalf (src/bus/leave-group.ts), against the test run's real Kafka.
// The member that needs removing is one that died without leaving: a kafkajs consumer in a child
// process, killed with SIGKILL once it has joined. Until its session ends (45 s here) the group hands
// no partition to anyone else, unless it is removed.
import { expect } from 'chai';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createBusConsumer, type BusConsumer } from '../../src/bus/consumer.js';
import { ensureTopic } from '../../src/bus/kafka.js';
import { GroupError, removeMember } from '../../src/bus/leave-group.js';
import { toMessage } from '../../src/bus/message.js';
import { randomId } from '../../src/shared/ids.js';
import { succeedsWithin } from '../../src/shared/within.js';
import { brokersFromEnv, ghost, openTempLog, requireKafka, uniqueName } from '../support/bus-kafka.js';
import { appendEvents, ticketUpdated } from '../support/updates-events.js';
import { eventually } from '../support/webhooks-dispatch.js';
import type { Kafka } from 'kafkajs';

const SESSION_MS = 45_000;
/** Well inside SESSION_MS: a group that waited for the dead member could not make it. */
const HANDED_OVER_MS = 15_000;

describe('removing a consumer group member on its behalf (real Kafka)', function () {
  this.timeout(90_000);
  let kafka: Kafka;
  let brokers: string[];
  const children: ChildProcess[] = [];
  const consumers: BusConsumer[] = [];

  before(function () {
    kafka = requireKafka(this);
    brokers = brokersFromEnv() ?? [];
  });

  afterEach(async () => {
    children.splice(0).forEach((child) => child.kill('SIGKILL'));
    await Promise.all(consumers.splice(0).map((consumer) => consumer.stop()));
  });

  const member = (group: string, memberId: string) => ({ brokers, clientId: 'leave-test', groupId: group, memberId });

  it('removes a member that died without leaving: the group hands its partitions to a new member at once', async () => {
    const [topic, group] = [uniqueName('leave'), uniqueName('group')];
    await ensureTopic(kafka, topic, 3);
    const dead = await ghost(brokers, topic, group, { sessionTimeoutMs: SESSION_MS });
    children.push(dead.child);
    dead.child.kill('SIGKILL');
    await once(dead.child, 'exit');

    const handled = new Set<string>();
    const consumer = createBusConsumer({ kafka, brokers, topic, group, sessionTimeoutMs: SESSION_MS, handle: async (record) => void handled.add(record.id), onError: () => undefined });
    consumers.push(consumer);
    // Its start resolves once the group has taken it in: only after the dead member is gone.
    const joined = consumer.start();
    expect(await removeMember(member(group, dead.memberId), { signal: AbortSignal.timeout(HANDED_OVER_MS) })).to.equal('left');
    expect(await succeedsWithin(joined, HANDED_OVER_MS), 'joined').to.equal(true);

    const temp = openTempLog();
    const producer = kafka.producer();
    try {
      await producer.connect();
      const records = await appendEvents(temp.log, 'ws-leave', [ticketUpdated(randomId()), ticketUpdated(randomId())]);
      await producer.send({ topic, messages: records.map(toMessage).map((m) => ({ key: m.key, value: m.value, headers: { ...m.headers } })) });
      await eventually('every event handled by the new member', () => records.every((r) => handled.has(r.id)), HANDED_OVER_MS);
    } finally {
      await producer.disconnect();
      await temp.close();
    }
    const described = (await kafka.admin().describeGroups([group])).groups[0];
    expect(described?.members.map((m) => m.memberId)).not.to.include(dead.memberId);
  });

  it("answers 'absent' for a member the group does not have, and for a group that does not exist", async () => {
    const [topic, group] = [uniqueName('leave'), uniqueName('group')];
    await ensureTopic(kafka, topic, 1);
    const live = await ghost(brokers, topic, group, { sessionTimeoutMs: SESSION_MS });
    children.push(live.child);
    const signal = AbortSignal.timeout(HANDED_OVER_MS);
    expect(await removeMember(member(group, 'ghost-not-a-member'), { signal })).to.equal('absent');
    expect(await removeMember(member(uniqueName('no-such-group'), 'anyone'), { signal })).to.equal('absent');
    // The live member is still there.
    const described = (await kafka.admin().describeGroups([group])).groups[0];
    expect(described?.members.map((m) => m.memberId)).to.deep.equal([live.memberId]);
  });

  it('keeps asking while no broker answers, and stops when aborted', async () => {
    const controller = new AbortController();
    let settled = false;
    const removal = removeMember({ brokers: ['127.0.0.1:1'], clientId: 'leave-test', groupId: 'g', memberId: 'm' }, { signal: controller.signal, retryMs: 50 }).finally(() => (settled = true));
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(settled).to.equal(false);
    controller.abort();
    const error = await removal.then(() => null, (e: unknown) => e);
    expect((error as Error | null)?.name).to.equal('AbortError');
  });

  it('rejects with the Kafka error code when the group refuses the request', async () => {
    const error = await removeMember(member('', 'm'), { signal: AbortSignal.timeout(HANDED_OVER_MS) }).then(() => null, (e: unknown) => e);
    expect(error).to.be.instanceOf(GroupError);
    expect(String(error)).to.match(/LeaveGroup answered Kafka error code 24/);
  });
});
