// The bytes of a delivery. The envelope is serialized once per event and those exact bytes are signed
// and sent on every attempt to every subscription. They are not stored: after a restart they are
// re-derived from the event at its log position, and JSON.stringify of the same stored record gives
// the same bytes again (key order and values survive the log's JSON round trip).
// The listen command builds its forwarded bodies with envelopeBody too, from /updates items.
import { toEnvelope, type Envelope } from '../../domain/envelope.js';
import type { EventLog, RecordedEvent } from '../../log/event-log.js';

/** The body of a delivery carrying this envelope. */
export const envelopeBody = (envelope: Envelope): Buffer => Buffer.from(JSON.stringify(envelope), 'utf8');

export const envelopeBytes = (record: RecordedEvent): Buffer => envelopeBody(toEnvelope(record));

/** The body of the event at `position`, or null when that event is no longer in the log. */
export const bodyAtPosition = async (log: EventLog, position: number): Promise<Buffer | null> => {
  const [record] = await log.readAll({ after: position - 1, limit: 1 });
  return record?.position === position && record.offset !== null ? envelopeBytes(record) : null;
};
