// The bytes of a delivery. The envelope is serialized once per event and those exact bytes are signed
// and sent on every attempt to every subscription. They are not stored: after a restart they are
// re-derived from the event at its log position, and JSON.stringify of the same stored record gives
// the same bytes again (key order and values survive the log's JSON round trip).
import { toEnvelope } from '../../domain/envelope.js';
import type { EventLog, RecordedEvent } from '../../log/event-log.js';

export const envelopeBytes = (record: RecordedEvent): Buffer => Buffer.from(JSON.stringify(toEnvelope(record)), 'utf8');

/** The body of the event at `position`, or null when that event is no longer in the log. */
export const bodyAtPosition = async (log: EventLog, position: number): Promise<Buffer | null> => {
  const [record] = await log.readAll({ after: position - 1, limit: 1 });
  return record?.position === position && record.offset !== null ? envelopeBytes(record) : null;
};
