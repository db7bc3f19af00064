// Which log a process role (and each thread of the embedded role) opens, and how. Apart from
// src/bus/roles.ts so that a worker thread that only needs its log does not load every feature:
// the EventStoreDB adapter is loaded only when EVENTSTORE_URL is set.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Config } from '../config/config.js';
import type { MicrosClock } from '../log/clock.js';
import type { EventLog } from '../log/event-log.js';
import { openSqliteLog, type SqliteEventLog } from '../log/sqlite.js';

const RELAY_POLL_MS = 2;

/** A role's log; the SQLite one also counts its commits and the writes they carried (the metrics route shows them). */
export type RoleLog = EventLog & Partial<Pick<SqliteEventLog, 'stats'>>;

/**
 * The role's log: EventStoreDB when EVENTSTORE_URL is set (the sequencer runs in relay or all), else
 * the SQLite file, shared by the processes of one host, and by the embedded role's threads (one
 * embedded service per data folder is kept by src/log/instance-lock.ts).
 */
export const openRoleLog = async (config: Config, clock: MicrosClock, thread: 'main' | 'dispatcher' | 'indexer' = 'main'): Promise<RoleLog> => {
  if (config.eventstoreUrl !== null) {
    const sequencer = thread === 'main' && (config.role === 'relay' || config.role === 'all');
    const { openEventStoreDbLog } = await import('../log/eventstoredb.js');
    return openEventStoreDbLog({ connectionString: config.eventstoreUrl, sequencer, clock });
  }
  fs.mkdirSync(config.dataDir, { recursive: true });
  const file = path.join(config.dataDir, 'events.sqlite');
  // The embedded main thread announces its commits to its dispatcher thread, which fans out at once
  // instead of at its next poll. Not the other way: the main thread's tails would wake at each
  // recorded delivery step; the poll takes those up in batches.
  // The history indexer hears neither: it reads the delivery engine's records, which the poll takes up in batches.
  const commitsChannel =
    config.role === 'all' && thread !== 'indexer' ? { name: `event-log:${path.resolve(file)}`, role: thread === 'main' ? ('announce' as const) : ('hear' as const) } : undefined;
  // The delivery engine's connection records only its own bookkeeping, which no client was told of:
  // its commits skip the fsync (a lost record repeats an attempt, at least once as always). The
  // indexer's only reads.
  const durability = thread === 'main' && config.role !== 'dispatcher' ? 'full' : 'relaxed';
  // The relay learns of the API servers' commits by this poll alone, and every event waits for it on
  // its way to Kafka and the dispatchers: it looks every 2 ms where the other roles look every 10
  // (a look reads the WAL index: 2.4 µs here, so about 1.2 ms of CPU a second).
  const pollIntervalMs = config.role === 'relay' ? RELAY_POLL_MS : undefined;
  return openSqliteLog({ file, clock, shared: true, durability, ...(pollIntervalMs === undefined ? {} : { pollIntervalMs }), ...(commitsChannel === undefined ? {} : { commitsChannel }) });
};

/** The log of the embedded role's dispatcher thread, or of its history indexer: its own connection, never the sequencer. */
export const openDispatcherLog = (config: Config, clock: MicrosClock, thread: 'dispatcher' | 'indexer' = 'dispatcher'): Promise<RoleLog> => openRoleLog(config, clock, thread);
