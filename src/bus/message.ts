// One Kafka message per sequenced public event: the value is the JSON of its final envelope (the bytes
// a webhook carries), the key its workspace (one partition per workspace keeps its order), and the
// headers carry what the envelope does not, so a consumer can rebuild the recorded event exactly.
import { toEnvelope } from '../domain/envelope.js';
import { isPublicEventType } from '../domain/event-types.js';
import type { JsonObject, RecordedEvent } from '../log/event-log.js';

export interface BusMessage {
  readonly key: string;
  readonly value: Buffer;
  readonly headers: Readonly<Record<string, string>>;
}

/** What a consumer receives (kafkajs KafkaMessage, narrowed). */
export interface ReceivedMessage {
  readonly value: Buffer | null;
  readonly headers?: Readonly<Record<string, Buffer | string | (Buffer | string)[] | undefined>>;
}

export const HEADERS = {
  eventId: 'event-id',
  type: 'event-type',
  workspaceId: 'workspace-id',
  position: 'position',
  offset: 'offset',
  stream: 'stream',
  revision: 'revision',
} as const;

export const toMessage = (record: RecordedEvent): BusMessage => ({
  key: record.workspaceId,
  value: Buffer.from(JSON.stringify(toEnvelope(record)), 'utf8'),
  headers: {
    [HEADERS.eventId]: record.id,
    [HEADERS.type]: record.type,
    [HEADERS.workspaceId]: record.workspaceId,
    [HEADERS.position]: String(record.position),
    [HEADERS.offset]: String(record.offset),
    [HEADERS.stream]: record.stream,
    [HEADERS.revision]: String(record.revision),
  },
});

export class PoisonMessage extends Error {
  constructor(reason: string) {
    super(`not an event envelope: ${reason}`);
    this.name = 'PoisonMessage';
  }
}

const headerText = (message: ReceivedMessage, name: string): string => {
  const raw = message.headers?.[name];
  const value = Array.isArray(raw) ? raw[0] : raw;
  if (value === undefined) throw new PoisonMessage(`header ${name} missing`);
  return value.toString();
};

const wholeNumber = (message: ReceivedMessage, name: string, min: number): number => {
  const text = headerText(message, name);
  const n = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(n) || n < min) throw new PoisonMessage(`header ${name} is "${text}"`);
  return n;
};

const isObject = (value: unknown): value is JsonObject => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * The recorded event a message carries. Throws PoisonMessage unless the value is the envelope its
 * headers describe, byte for byte as toMessage writes it (so what is sent on is what was relayed).
 */
export const fromMessage = (message: ReceivedMessage): RecordedEvent => {
  if (message.value === null) throw new PoisonMessage('empty value');
  let parsed: unknown;
  try {
    parsed = JSON.parse(message.value.toString('utf8'));
  } catch {
    throw new PoisonMessage('value is not JSON');
  }
  if (!isObject(parsed) || !isObject(parsed['data'])) throw new PoisonMessage('value is not an envelope object');
  const record: RecordedEvent = {
    id: headerText(message, HEADERS.eventId),
    type: headerText(message, HEADERS.type),
    workspaceId: headerText(message, HEADERS.workspaceId),
    data: parsed['data'],
    metadata: {},
    stream: headerText(message, HEADERS.stream),
    revision: wholeNumber(message, HEADERS.revision, 0),
    position: wholeNumber(message, HEADERS.position, 1),
    offset: wholeNumber(message, HEADERS.offset, 0),
  };
  if (!isPublicEventType(record.type)) throw new PoisonMessage(`type ${record.type} is not public`);
  if (JSON.stringify(toEnvelope(record)) !== message.value.toString('utf8')) throw new PoisonMessage('value does not match its headers');
  return record;
};
