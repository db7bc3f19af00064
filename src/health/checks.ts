// What /readyz asks: each engine the process needs, with a cheap request it must answer. Clients are
// made once and reused, so a check costs one round trip, not a connection.
import { Redis } from 'ioredis';
import type { Admin, Kafka } from 'kafkajs';
import type { EventLog } from '../log/event-log.js';

export interface HealthCheck {
  readonly name: string;
  /** Resolves when the engine answers; rejects (or never settles) when it does not. */
  check(): Promise<void>;
  close?(): Promise<void>;
}

/** A part of the process that can stop on its own (a relay, a Kafka consumer): ready while `failure` is null. */
export const failureCheck = (name: string, failure: () => Error | null): HealthCheck => ({
  name,
  check: async () => {
    const error = failure();
    if (error !== null) throw error;
  },
});

export const logCheck = (log: EventLog): HealthCheck => ({
  name: 'log',
  check: async () => void (await log.headPosition()),
});

export const kafkaCheck = (kafka: Kafka): HealthCheck => {
  let admin: Admin | null = null;
  const drop = async () => {
    const stale = admin;
    admin = null;
    await stale?.disconnect().catch(() => undefined);
  };
  return {
    name: 'kafka',
    async check() {
      try {
        if (admin === null) {
          admin = kafka.admin();
          await admin.connect();
        }
        await admin.describeCluster();
      } catch (error) {
        await drop();
        throw error;
      }
    },
    close: drop,
  };
};

export const redisCheck = (url: string): HealthCheck => {
  // No offline queue: a PING while disconnected fails at once instead of waiting for a reconnect.
  const redis = new Redis(url, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0 });
  // Reconnection is automatic; the failure shows in the check, not as an unhandled 'error' event.
  redis.on('error', () => undefined);
  return {
    name: 'redis',
    async check() {
      if (redis.status === 'wait') await redis.connect();
      await redis.ping();
    },
    close: async () => redis.disconnect(),
  };
};
