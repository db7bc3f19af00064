import { expect } from 'chai';
import { envelopeOf, isoMicros, linksFor, toEnvelope } from '../../src/domain/envelope.js';
import type { RecordedEvent } from '../../src/log/event-log.js';

describe('envelope', () => {
  it('writes timestamps with microseconds and +00:00', () => {
    expect(isoMicros(1_763_765_235_123_456)).to.equal('2025-11-21T22:47:15.123456+00:00');
    expect(isoMicros(0)).to.equal('1970-01-01T00:00:00.000000+00:00');
    expect(isoMicros(1_000_001)).to.equal('1970-01-01T00:00:01.000001+00:00');
  });

  it('links ticket and message events to the ticket and its messages', () => {
    expect(linksFor('message.created', { ticket_id: 't1' })).to.deep.equal({ ticket: '/api/v1/tickets/t1', messages: '/api/v1/tickets/t1/messages' });
    expect(linksFor('ticket.closed', { ticket_id: 'a/b' })).to.deep.equal({ ticket: '/api/v1/tickets/a%2Fb', messages: '/api/v1/tickets/a%2Fb/messages' });
  });

  it('gives no links when a ticket or message event has no ticket_id', () => {
    expect(linksFor('message.reaction.added', { message_id: 'm' })).to.deep.equal({});
  });

  it('links contact events to the contact and its tickets', () => {
    expect(linksFor('contact.identified', { id: 'c1' })).to.deep.equal({ contact: '/api/v1/contacts/c1', tickets: '/api/v1/tickets?contact_id=c1' });
  });

  it('gives every other event an empty _links object', () => {
    for (const type of ['billing.payment_received', 'operator.status.changed', 'visitor.reply_waiting', 'webhook.test']) {
      expect(linksFor(type, { ticket_id: 't', id: 'x' })).to.deep.equal({});
    }
  });

  it('builds the envelope from a sequenced record with its offset as timestamp', () => {
    const record: RecordedEvent = {
      id: 'a'.repeat(32), type: 'ticket.created', workspaceId: 'w', data: { ticket_id: 't' }, metadata: {},
      stream: 'ticket-t', revision: 0, position: 7, offset: 1_700_000_000_000_001,
    };
    expect(toEnvelope(record)).to.deep.equal(
      envelopeOf({ id: record.id, type: record.type, micros: 1_700_000_000_000_001, workspaceId: 'w', data: record.data }),
    );
    expect(Object.keys(toEnvelope(record))).to.deep.equal(['id', 'type', 'timestamp', 'workspace_id', 'data', '_links']);
    expect(() => toEnvelope({ ...record, offset: null })).to.throw(/no offset/);
  });
});
