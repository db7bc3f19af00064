import { expect } from 'chai';
import type { Decided } from '../../src/domain/aggregate.js';
import { EventData } from '../../src/domain/catalogue.js';
import { contactAggregate, REPLY_WAITING_INTERVAL_US, replyWaitingHeld, type ContactCommand, type ContactState } from '../../src/domain/contact/contact.js';
import { identityKeys, identityStream } from '../../src/domain/contact/identity.js';

const WS = 'w1';
const T0 = Date.UTC(2026, 0, 1) * 1000;

type Request = ContactCommand extends infer C ? (C extends unknown ? Omit<C, 'workspaceId' | 'now' | 'contactId'> : never) : never;

const decide = (state: ContactState, command: Request, now = T0, workspaceId = WS) => contactAggregate.decide({ ...command, contactId: 'c1', workspaceId, now } as ContactCommand, state);

const events = (state: ContactState, command: Request, now = T0): readonly Decided[] => {
  const result = decide(state, command, now);
  if (result._tag === 'Left') throw new Error(result.left.code);
  return result.right;
};

const fold = (state: ContactState, decided: readonly Decided[]) => decided.reduce(contactAggregate.evolve, state);

const saved = fold(contactAggregate.initial, events(contactAggregate.initial, { kind: 'save', fields: { email: 'a@b.c', internal_id: 'x1' }, via: 'api' }));

/** The same person, identified by the widget: a widget visitor. */
const visitor = fold(saved, events(saved, { kind: 'save', fields: { email: 'a@b.c' }, via: 'widget' }));

const replyWaiting: Extract<Request, { kind: 'reply_waiting' }> = {
  kind: 'reply_waiting',
  ticketId: 'ticket-123456789',
  messageId: 'm1',
  operatorName: 'Ann',
  preview: 'hi',
  locale: 'en',
  surface: 'widget',
  openUrl: '/x',
  visitorNotifications: true,
};

describe('contact aggregate', () => {
  it('saves through the API with internal events only', () => {
    const first = events(contactAggregate.initial, { kind: 'save', fields: { email: 'a@b.c' }, via: 'api' });
    expect(first.map((e) => e.type)).to.deep.equal(['contact.registered']);
    expect(events(saved, { kind: 'save', fields: { email: 'a@b.c' }, via: 'api' })).to.deep.equal([]);
    expect(events(saved, { kind: 'save', fields: { full_name: 'Ann' }, via: 'api' })).to.deep.equal([
      { type: 'contact.changed', data: { contact_id: 'c1', full_name: 'Ann' } },
    ]);
  });

  it('widget identify: contact.created the first time, contact.identified every time', () => {
    const first = events(contactAggregate.initial, { kind: 'save', fields: { telegram_id: '42' }, via: 'widget' });
    expect(first.map((e) => e.type)).to.deep.equal(['contact.registered', 'contact.created', 'contact.identified']);
    const again = events(fold(contactAggregate.initial, first), { kind: 'save', fields: { telegram_id: '42' }, via: 'widget' });
    expect(again.map((e) => e.type)).to.deep.equal(['contact.identified']);
    for (const e of [...first, ...again].filter((d) => d.type.startsWith('contact.') && d.type in EventData)) {
      expect(EventData[e.type as 'contact.created'].is(e.data)).to.equal(true);
    }
    expect(again[0]?.data).to.deep.equal({ id: 'c1', internal_id: null, email: null, full_name: null, phone: null, telegram_id: '42' });
  });

  it('blocks and unblocks, idempotently', () => {
    const blocked = fold(saved, events(saved, { kind: 'set_blocked', blocked: true }));
    expect(blocked.blocked).to.equal(true);
    expect(events(blocked, { kind: 'set_blocked', blocked: true })).to.deep.equal([]);
    expect(events(blocked, { kind: 'set_blocked', blocked: false }).map((e) => e.type)).to.deep.equal(['contact.unblocked']);
  });

  it("is not found in another workspace", () => {
    const result = decide(saved, { kind: 'set_blocked', blocked: true }, T0, 'w2');
    expect(result._tag === 'Left' && result.left.code).to.equal('CONTACT_NOT_FOUND');
  });

  it('sends visitor.reply_waiting to a widget visitor at most once per 5 minutes', () => {
    const first = events(visitor, replyWaiting, T0);
    expect(first).to.have.length(1);
    expect(EventData['visitor.reply_waiting'].is(first[0]?.data)).to.equal(true);
    expect(first[0]?.data).to.include({ contact_id: 'c1', external_id: 'x1', telegram_user_id: null, ticket_short_id: 'ticket-1', replied_at: '2026-01-01T00:00:00.000000+00:00' });
    const after = fold(visitor, first);
    expect(events(after, replyWaiting, T0 + 1)).to.deep.equal([]);
    expect(replyWaitingHeld({ ...replyWaiting, now: T0 + 1 }, after)).to.equal('sent_within_5_minutes');
    expect(events(after, replyWaiting, T0 + REPLY_WAITING_INTERVAL_US - 1)).to.deep.equal([]);
    expect(events(after, replyWaiting, T0 + REPLY_WAITING_INTERVAL_US)).to.have.length(1);
  });

  it('sends no visitor.reply_waiting while visitor notifications are off, nor to a contact the widget never identified', () => {
    const off = { ...replyWaiting, visitorNotifications: false };
    expect(events(visitor, off, T0)).to.deep.equal([]);
    expect(replyWaitingHeld({ ...off, now: T0 }, visitor)).to.equal('visitor_notifications_disabled');
    // `saved` came through the API only (an email or Telegram contact).
    expect(saved.widgetVisitor).to.equal(false);
    expect(events(saved, replyWaiting, T0)).to.deep.equal([]);
    expect(replyWaitingHeld({ ...replyWaiting, now: T0 }, saved)).to.equal('not_a_widget_visitor');
    expect(visitor.widgetVisitor).to.equal(true);
    expect(replyWaitingHeld({ ...replyWaiting, now: T0 }, visitor)).to.equal(null);
  });

  it('keys identities per workspace, telegram_id first, email case-insensitively', () => {
    expect(identityKeys({ email: ' A@B.C ', telegram_id: '42' })).to.deep.equal([
      { kind: 'telegram_id', value: '42' },
      { kind: 'email', value: 'a@b.c' },
    ]);
    const key = { kind: 'email' as const, value: 'a@b.c' };
    expect(identityStream('w1', key)).to.not.equal(identityStream('w2', key));
    expect(identityStream('w1', key)).to.not.include('a@b.c');
  });
});
