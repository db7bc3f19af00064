// Removing a member from a consumer group on its behalf: the two Kafka requests kafkajs does not
// offer for a member other than its current one (FindCoordinator v2, then LeaveGroup v2, both
// supported from Kafka 2.0 on). kafkajs restarts a crashed consumer as a new member, and the group
// then hands out no partition until the member it was has missed a whole session (30 s by default):
// after a single broker's restart, every dispatcher stalled that long. The request is sent by the
// consumer that was that member, so no live member is ever removed.
import { createConnection } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

const API = { findCoordinator: 10, leaveGroup: 13 } as const;
const VERSION = 2;
/** Kafka error codes: worth asking again shortly (the coordinator is loading, moving or away). */
const RETRIABLE = new Set([14, 15, 16]);
/** UNKNOWN_MEMBER_ID and GROUP_ID_NOT_FOUND: the member is not in the group (any more). */
const NOT_A_MEMBER = new Set([25, 69]);

export interface GroupMember {
  /** Bootstrap brokers, `host:port`. */
  readonly brokers: readonly string[];
  readonly clientId: string;
  readonly groupId: string;
  readonly memberId: string;
}

export interface RemoveOptions {
  /** Stops the attempts (a consumer that stops). */
  readonly signal: AbortSignal;
  readonly retryMs?: number;
  readonly requestTimeoutMs?: number;
}

/** A Kafka error code the group answered that asking again will not change. */
export class GroupError extends Error {}

const string = (value: string): Buffer => {
  const bytes = Buffer.from(value, 'utf8');
  const length = Buffer.alloc(2);
  length.writeInt16BE(bytes.length);
  return Buffer.concat([length, bytes]);
};

/** A request with header v1 (api key, version, correlation id, client id), size first. */
const frame = (apiKey: number, clientId: string, body: Buffer): Buffer => {
  const header = Buffer.alloc(8);
  header.writeInt16BE(apiKey, 0);
  header.writeInt16BE(VERSION, 2);
  header.writeInt32BE(1, 4);
  const payload = Buffer.concat([header, string(clientId), body]);
  const size = Buffer.alloc(4);
  size.writeInt32BE(payload.length);
  return Buffer.concat([size, payload]);
};

/** Reads a response field by field. */
const reader = (buffer: Buffer) => {
  let at = 0;
  const int16 = () => ((at += 2), buffer.readInt16BE(at - 2));
  const int32 = () => ((at += 4), buffer.readInt32BE(at - 4));
  const text = () => {
    const length = int16();
    if (length < 0) return null;
    at += length;
    return buffer.toString('utf8', at - length, at);
  };
  return { int16, int32, text };
};

/** Sends one request on a connection of its own; resolves the response after its correlation id. */
const exchange = (address: string, request: Buffer, options: RemoveOptions): Promise<Buffer> =>
  new Promise((resolve, reject) => {
    options.signal.throwIfAborted();
    const colon = address.lastIndexOf(':');
    const socket = createConnection({ host: address.slice(0, colon), port: Number(address.slice(colon + 1)) });
    // Not the socket's own `signal` option: its listener stays on the signal after the socket closes.
    const abort = () => socket.destroy(options.signal.reason as Error);
    options.signal.addEventListener('abort', abort, { once: true });
    let received = Buffer.alloc(0);
    socket.setTimeout(options.requestTimeoutMs ?? 5_000, () => socket.destroy(new Error(`${address}: no answer`)));
    socket.on('connect', () => socket.write(request));
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      if (received.length < 4 || received.length < 4 + received.readInt32BE(0)) return;
      socket.destroy();
      resolve(received.subarray(8, 4 + received.readInt32BE(0)));
    });
    socket.on('error', reject);
    socket.on('close', () => {
      options.signal.removeEventListener('abort', abort);
      reject(new Error(`${address}: closed before an answer`));
    });
  });

const codeOf = (apiName: string, code: number): 'done' | 'again' | 'absent' => {
  if (code === 0) return 'done';
  if (RETRIABLE.has(code)) return 'again';
  if (NOT_A_MEMBER.has(code)) return 'absent';
  throw new GroupError(`${apiName} answered Kafka error code ${code}`);
};

/** One try through `broker`: 'again' when the group's coordinator cannot answer yet. */
const tryThrough = async (broker: string, member: GroupMember, options: RemoveOptions): Promise<'left' | 'absent' | 'again'> => {
  const found = reader(await exchange(broker, frame(API.findCoordinator, member.clientId, Buffer.concat([string(member.groupId), Buffer.from([0])])), options));
  found.int32(); // throttle time
  const findCode = codeOf('FindCoordinator', found.int16());
  if (findCode !== 'done') return findCode;
  found.text(); // error message
  found.int32(); // node id
  const coordinator = `${found.text() ?? ''}:${found.int32()}`;
  const left = reader(await exchange(coordinator, frame(API.leaveGroup, member.clientId, Buffer.concat([string(member.groupId), string(member.memberId)])), options));
  left.int32(); // throttle time
  const leaveCode = codeOf('LeaveGroup', left.int16());
  return leaveCode === 'done' ? 'left' : leaveCode;
};

/**
 * Asks the group's coordinator to remove `member`, through each broker in turn and again every
 * `retryMs` while none can answer (Kafka away or loading the group), until it is removed or is not
 * a member; rejects with a GroupError when the group refuses, or when `signal` aborts.
 */
export const removeMember = async (member: GroupMember, options: RemoveOptions): Promise<'left' | 'absent'> => {
  for (;;) {
    for (const broker of member.brokers) {
      options.signal.throwIfAborted();
      const outcome = await tryThrough(broker, member, options).catch((error: unknown) => {
        if (error instanceof GroupError) throw error;
        return 'again' as const;
      });
      if (outcome !== 'again') return outcome;
    }
    await sleep(options.retryMs ?? 500, undefined, { signal: options.signal });
  }
};
