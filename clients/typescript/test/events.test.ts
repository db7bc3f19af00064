// Parsing envelopes into the generated event types.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { EVENT_TYPES, EventParseError, isEvent, parseEvent, receive } from '../src/index.js';

const vectors = (JSON.parse(readFileSync(new URL('../../test-vectors.json', import.meta.url), 'utf8')) as {
  vectors: { name: string; scheme: string; secrets: string[]; body_base64: string; headers: Record<string, string>; now: number }[];
}).vectors;
const good = vectors.find((v) => v.scheme === 'standard-webhooks' && v.name === 'good signature')!;
const body = Buffer.from(good.body_base64, 'base64');
const envelope = JSON.parse(body.toString('utf8')) as Record<string, any>;
const withData = (data: Record<string, unknown>): string => JSON.stringify({ ...envelope, data: { ...envelope['data'], ...data } });

describe('events', () => {
  test('a verified delivery parses into its typed event', () => {
    const event = receive(body, good.headers, good.secrets, { now: good.now });
    assert.ok(isEvent(event, 'ticket.created'));
    // Typed: status is the union of the catalogue's statuses.
    const status: 'new' | 'open' | 'in_progress' | 'pending' | 'resolved' | 'closed' = event.data.status;
    assert.equal(status, 'new');
    assert.equal(event.data.subject, 'Printer on fire');
    assert.equal(isEvent(event, 'ticket.closed'), false);
  });
  test('a delivery that fails verification is not parsed', () => {
    assert.throws(() => receive(Buffer.from(withData({ subject: 'x' })), good.headers, good.secrets, { now: good.now }), /matches the secrets/);
  });
  test('the catalogue is the generated one', () => {
    assert.ok(EVENT_TYPES.includes('message.created'));
    assert.ok(EVENT_TYPES.includes('billing.plan_renewed'));
  });
  test('data that breaks its schema is refused, naming the field', () => {
    assert.throws(() => parseEvent(withData({ status: 'lost' })), (e: unknown) => e instanceof EventParseError && /\$\.data\.status: not one of/.test(e.message));
    assert.throws(() => parseEvent(withData({ subject: 7 })), /\$\.data\.subject: matches none/);
    const { ticket_id: _, ...rest } = envelope['data'] as Record<string, unknown>;
    assert.throws(() => parseEvent(JSON.stringify({ ...envelope, data: rest })), /\$\.data\.ticket_id: missing/);
  });
  test('an envelope without its fields, or a body that is not JSON, is refused', () => {
    assert.throws(() => parseEvent('{"type":"ticket.created"}'), /\$\.id: missing/);
    assert.throws(() => parseEvent('{"id":'), /not JSON/);
    assert.throws(() => parseEvent(''), EventParseError);
  });
  test('a type the helpers do not know parses with untyped data', () => {
    const event = parseEvent(JSON.stringify({ ...envelope, type: 'webhook.test', data: { anything: [1] } }));
    assert.equal(event.type, 'webhook.test');
    assert.deepEqual(event.data, { anything: [1] });
  });
});
