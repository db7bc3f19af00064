// Kafka restart benchmark: how soon a dispatchers' consumer group consumes again after its broker is
// killed with SIGKILL and restarted on its storage. `npm run bench -- kafka-restart`.
//
// A private broker (scripts/kafka.sh on the bench's own port), and for each client two consumers of
// one group with the service's default session (30 s), a producer sending throughout. Measured from
// the moment the restarted broker answers to each consumer's first event after it; the figure is the
// later of the two. The clients: the dispatchers' (it retries a broker it cannot reach for
// CONSUMER_RIDE_OUT_MS) and kafkajs's retries as the relay and /readyz have them (they give up after
// about 6 s: a consumer that gave up joins again as a new member, and the one it was leaves). The
// ceiling beside them is the broker's own restart (kill → answering), which no client can beat.
import { loadavg } from 'node:os';
import { Partitioners, type Kafka } from 'kafkajs';
import { createBusConsumer } from '../../src/bus/consumer.js';
import { CONSUMER_RIDE_OUT_MS, createKafka, ensureTopic } from '../../src/bus/kafka.js';
import { toMessage } from '../../src/bus/message.js';
import type { RecordedEvent } from '../../src/log/event-log.js';
import { randomId } from '../../src/shared/ids.js';
import { engine as engines } from './engines.js';

const KAFKA_PORT = 19398;
const SESSION_MS = 30_000;
/** Longer than the session: a group that waits out a dead member resumes within it. */
const RESUME_TIMEOUT_MS = 60_000;
const BROKERS = [`127.0.0.1:${KAFKA_PORT}`];
const engine = engines({ kafka: KAFKA_PORT, redis: 0 });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const record = (n: number, topic: string): RecordedEvent => ({
  id: `${topic}-${n}`,
  type: 'ticket.updated',
  workspaceId: `ws-${n % 24}`,
  data: { ticket_id: `t-${n}` },
  metadata: {},
  stream: `ticket-${n}`,
  revision: 0,
  position: n,
  offset: n,
});

/** Sends one event every 50 ms until stopped, starting over with a new producer after a failure. */
const sendThroughout = (kafka: Kafka, topic: string) => {
  let stopped = false;
  const done = (async () => {
    for (let n = 1; !stopped; n += 1) {
      const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
      try {
        await producer.connect();
        for (; !stopped; n += 1) {
          const message = toMessage(record(n, topic));
          await producer.send({ topic, messages: [{ key: message.key, value: message.value, headers: { ...message.headers } }] });
          await sleep(50);
        }
      } catch {
        await sleep(200);
      } finally {
        await producer.disconnect().catch(() => undefined);
      }
    }
  })();
  return async () => {
    stopped = true;
    await done;
  };
};

/** Kills the broker with SIGKILL and starts it again on its storage (kafka.sh restart); resolves with the ms until it answered. */
const restartBroker = async (): Promise<number> => {
  const started = performance.now();
  await engine('kafka', 'restart');
  return performance.now() - started;
};

const measure = async (label: string, rideOutMs: number | undefined) => {
  const kafka = createKafka(BROKERS, `bench-${label}`, rideOutMs);
  const [topic, group] = [`restart-${randomId().slice(0, 8)}`, `dispatchers-${randomId().slice(0, 8)}`];
  await ensureTopic(kafka, topic);
  const lastHandled = [0, 0];
  const consumers = lastHandled.map((_, k) =>
    createBusConsumer({ kafka, brokers: BROKERS, topic, group, sessionTimeoutMs: SESSION_MS, handle: async () => void (lastHandled[k] = performance.now()), onError: () => undefined }),
  );
  const admin = kafka.admin();
  await Promise.all([...consumers.map((c) => c.start()), admin.connect()]);
  const stopSending = sendThroughout(kafka, topic);
  while (lastHandled.some((at) => at === 0)) await sleep(50);
  const members = async () => ((await admin.describeGroups([group])).groups[0]?.members ?? []).map((m) => m.memberId).sort().join();
  const before = await members();

  const restartMs = await restartBroker();
  const back = performance.now();
  while (lastHandled.some((at) => at < back) && performance.now() - back < RESUME_TIMEOUT_MS) await sleep(10);
  const resumeMs = Math.max(...lastHandled.map((at) => (at < back ? RESUME_TIMEOUT_MS : at - back)));
  const sameMembers = (await members()) === before;
  console.log(`  ${label.padEnd(9)} consumed again ${Math.round(resumeMs).toLocaleString('en')} ms after the broker was back (restart took ${Math.round(restartMs).toLocaleString('en')} ms); ${sameMembers ? 'the same members' : 'new members'}`);
  await stopSending();
  await Promise.all([...consumers.map((c) => c.stop()), admin.disconnect()]);
  return { restartMs, resumeMs, sameMembers };
};

export async function run(): Promise<Record<string, number | string>> {
  console.log(`kafka-restart: two consumers of one group (session ${SESSION_MS / 1000} s), broker killed and restarted on its storage`);
  await engine('kafka', 'start');
  try {
    const rideOut = await measure('ride-out', CONSUMER_RIDE_OUT_MS);
    const giveUp = await measure('give-up', undefined);
    const ceiling = Math.min(rideOut.restartMs, giveUp.restartMs);
    console.log(`  ceiling   the broker's own restart: ${Math.round(ceiling).toLocaleString('en')} ms from the kill until it answered`);
    return {
      bench: 'kafka-restart',
      resume_ms_ride_out: Math.round(rideOut.resumeMs),
      resume_ms_give_up: Math.round(giveUp.resumeMs),
      same_members_ride_out: String(rideOut.sameMembers),
      same_members_give_up: String(giveUp.sameMembers),
      broker_restart_ms: Math.round(ceiling),
      session_ms: SESSION_MS,
      load_average_1m: Number(loadavg()[0]?.toFixed(2)),
    };
  } finally {
    await engine('kafka', 'stop');
  }
}
