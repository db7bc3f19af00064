import { expect } from 'chai';
import type { Either } from 'fp-ts/lib/Either.js';
import type { Decided } from '../../src/domain/aggregate.js';
import { EventData, TicketStatus } from '../../src/domain/catalogue.js';
import type { DomainError } from '../../src/domain/errors.js';
import { isPublicEventType } from '../../src/domain/event-types.js';
import type { NewMessage, TicketCommand } from '../../src/domain/ticket/commands.js';
import { grantClaims } from '../../src/domain/ticket/quota.js';
import type { TicketState } from '../../src/domain/ticket/state.js';
import { ticketAggregate } from '../../src/domain/ticket/ticket.js';
import { canPatch, PATCH_TRANSITIONS } from '../../src/domain/ticket/transitions.js';

const WS = 'w1';
const T = 't1';
const T0 = Date.UTC(2026, 0, 1) * 1000;
const STATUSES = Object.keys(TicketStatus.keys) as (keyof typeof TicketStatus.keys)[];

type Request = TicketCommand extends infer C ? (C extends unknown ? Omit<C, 'workspaceId' | 'now' | 'ticketId'> : never) : never;

const message = (over: Partial<NewMessage> = {}): NewMessage => ({
  messageId: 'm1',
  senderType: 'bot',
  senderId: WS,
  senderName: null,
  content: 'hello',
  media: [],
  isInternal: false,
  ...over,
});

const decide = (state: TicketState, command: Request, now = T0, workspaceId = WS): Either<DomainError, readonly Decided[]> =>
  ticketAggregate.decide({ ...command, ticketId: T, workspaceId, now } as TicketCommand, state);

const events = (result: Either<DomainError, readonly Decided[]>): readonly Decided[] => {
  if (result._tag === 'Left') throw new Error(`expected events, got ${result.left.code}`);
  return result.right;
};

const errorOf = (result: Either<DomainError, readonly Decided[]>): string => (result._tag === 'Left' ? result.left.code : 'none');

const fold = (state: TicketState, decided: readonly Decided[]) => decided.reduce(ticketAggregate.evolve, state);

/** Public events must match the catalogue codec. */
const expectCatalogue = (decided: readonly Decided[]) => {
  for (const e of decided.filter((d) => isPublicEventType(d.type))) {
    expect(EventData[e.type as keyof typeof EventData].is(e.data), `${e.type} ${JSON.stringify(e.data)}`).to.equal(true);
  }
};

const created = (withMessage = true) => {
  const decided = events(decide(ticketAggregate.initial, { kind: 'create', contactId: 'c1', subject: 'Help', priority: 'high', message: withMessage ? message() : null }));
  expectCatalogue(decided);
  return fold(ticketAggregate.initial, decided);
};

const inStatus = (status: TicketStatus) => ({ ...created(), status });

describe('ticket aggregate', () => {
  it('creates a ticket with ticket.created and the first message', () => {
    const decided = events(decide(ticketAggregate.initial, { kind: 'create', contactId: 'c1', subject: 'Help', priority: 'high', message: message() }));
    expect(decided.map((e) => e.type)).to.deep.equal(['ticket.opened', 'ticket.created', 'message.created']);
    expect(decided[1]?.data).to.deep.equal({ ticket_id: T, status: 'new', priority: 'high', contact_id: 'c1', subject: 'Help' });
    expectCatalogue(decided);
  });

  it("is not found for another workspace's caller", () => {
    expect(errorOf(decide(created(), { kind: 'close' }, T0, 'w2'))).to.equal('TICKET_NOT_FOUND');
    expect(errorOf(decide(ticketAggregate.initial, { kind: 'close' }))).to.equal('TICKET_NOT_FOUND');
  });

  describe('status transition table (PATCH)', () => {
    for (const from of STATUSES) {
      for (const to of STATUSES) {
        const allowed = from === to || PATCH_TRANSITIONS[from].includes(to);
        it(`${from} → ${to}: ${allowed ? 'allowed' : 'TICKET_INVALID_STATUS_TRANSITION'}`, () => {
          const result = decide(inStatus(from), { kind: 'update', status: to });
          expect(canPatch(from, to)).to.equal(allowed);
          if (!allowed) return expect(errorOf(result)).to.equal('TICKET_INVALID_STATUS_TRANSITION');
          const decided = events(result);
          expectCatalogue(decided);
          expect(decided.length === 0).to.equal(from === to);
          if (from !== to) expect(fold(inStatus(from), decided).status).to.equal(to);
        });
      }
    }

    it('never goes back to new and never leaves closed by PATCH', () => {
      for (const from of STATUSES) expect(canPatch(from, 'new')).to.equal(from === 'new');
      expect(PATCH_TRANSITIONS.closed).to.deep.equal([]);
    });
  });

  it('PATCH emits ticket.updated with ids only', () => {
    const decided = events(decide(created(), { kind: 'update', subject: 'New subject', priority: 'normal' }));
    expect(decided.find((e) => e.type === 'ticket.updated')?.data).to.deep.equal({ ticket_id: T, workspace_id: WS });
  });

  it('closes with resolution time and refuses to close twice', () => {
    const later = T0 + 90_500_000;
    const decided = events(decide(created(), { kind: 'close' }, later));
    expect(decided).to.have.length(1);
    expect(decided[0]?.data).to.deep.equal({ ticket_id: T, closed_at: '2026-01-01T00:01:30.500000+00:00', resolution_secs: 90 });
    expectCatalogue(decided);
    const closed = fold(created(), decided);
    expect(errorOf(decide(closed, { kind: 'close' }))).to.equal('TICKET_ALREADY_CLOSED');
  });

  it('reopens resolved and closed tickets only', () => {
    for (const status of STATUSES) {
      const result = decide(inStatus(status), { kind: 'reopen' });
      if (status === 'resolved' || status === 'closed') {
        expect(events(result)[0]).to.deep.equal({ type: 'ticket.reopened', data: { ticket_id: T, status: 'open' } });
      } else {
        expect(errorOf(result)).to.equal('TICKET_INVALID_STATUS_TRANSITION');
      }
    }
  });

  it('accepts ratings 1 to 5, with the comment only when given', () => {
    for (const rating of [0, 6, 2.5, -1]) expect(errorOf(decide(created(), { kind: 'rate', rating }))).to.equal('VALIDATION_ERROR');
    expect(events(decide(created(), { kind: 'rate', rating: 1 }))[0]?.data).to.deep.equal({ ticket_id: T, rating: 1 });
    const withComment = events(decide(created(), { kind: 'rate', rating: 5, comment: 'great' }));
    expect(withComment[0]?.data).to.deep.equal({ ticket_id: T, rating: 5, comment: 'great' });
    expectCatalogue(withComment);
  });

  it('refuses empty messages, accepts media-only ones', () => {
    expect(errorOf(decide(created(), { kind: 'post_message', message: message({ messageId: 'm2', content: '  ' }) }))).to.equal('MESSAGE_EMPTY');
    const media = [{ id: 'f1', url: '/api/media/f1', file_name: 'a.png', content_type: 'image/png', size: 3 }];
    expectCatalogue(events(decide(created(), { kind: 'post_message', message: message({ messageId: 'm2', content: '', media }) })));
  });

  it("brings a pending ticket back to open on the contact's reply", () => {
    const decided = events(decide(inStatus('pending'), { kind: 'post_message', message: message({ messageId: 'm2', senderType: 'contact', senderId: 'c1' }) }));
    expect(decided.map((e) => e.type)).to.deep.equal(['message.created', 'ticket.changed', 'ticket.updated']);
    expect(fold(inStatus('pending'), decided).status).to.equal('open');
  });

  it('edits messages but not system messages', () => {
    const withSystem = fold(created(), events(decide(created(), { kind: 'post_message', message: message({ messageId: 'sys', senderId: null }) })));
    expect(errorOf(decide(withSystem, { kind: 'edit_message', messageId: 'sys', content: 'x' }))).to.equal('VALIDATION_ERROR');
    expect(errorOf(decide(withSystem, { kind: 'edit_message', messageId: 'nope', content: 'x' }))).to.equal('MESSAGE_NOT_FOUND');
    const edited = events(decide(withSystem, { kind: 'edit_message', messageId: 'm1', content: 'changed' }));
    expect(edited.map((e) => e.type)).to.deep.equal(['message.edited']);
    expectCatalogue(edited);
  });

  it('keeps one reaction per reactor and removes it', () => {
    const add = (state: TicketState, emoji: string) => decide(state, { kind: 'add_reaction', messageId: 'm1', reactorKind: 'visitor', reactorId: 'v1', emoji });
    const reacted = fold(created(), events(add(created(), '👍')));
    expect(events(add(reacted, '👍'))).to.deep.equal([]);
    const removed = events(decide(reacted, { kind: 'remove_reaction', messageId: 'm1', reactorId: 'v1' }));
    expect(removed[0]).to.deep.equal({ type: 'message.reaction.removed', data: { message_id: 'm1', reactor_id: 'v1' } });
    expect(events(decide(fold(reacted, removed), { kind: 'remove_reaction', messageId: 'm1', reactorId: 'v1' }))).to.deep.equal([]);
  });

  it("takes an operator's reaction back without message.reaction.removed, which the catalogue keeps for widget visitors", () => {
    const reacted = fold(created(), events(decide(created(), { kind: 'add_reaction', messageId: 'm1', reactorKind: 'operator', reactorId: 'o2', emoji: '👍' })));
    const withdrawn = events(decide(reacted, { kind: 'remove_reaction', messageId: 'm1', reactorId: 'o2' }));
    expect(withdrawn).to.deep.equal([{ type: 'message.reaction.withdrawn', data: { message_id: 'm1', reactor_id: 'o2' } }]);
    // Gone from the state: taking it back again decides nothing, adding it again is a new reaction.
    const after = fold(reacted, withdrawn);
    expect(events(decide(after, { kind: 'remove_reaction', messageId: 'm1', reactorId: 'o2' }))).to.deep.equal([]);
    expect(events(decide(after, { kind: 'add_reaction', messageId: 'm1', reactorKind: 'operator', reactorId: 'o2', emoji: '👍' })).map((e) => e.type)).to.deep.equal(['message.reaction.added']);
  });

  it('assigns (to in_progress), transfers and force-takes', () => {
    const assigned = events(decide(created(), { kind: 'assign', operatorId: 'o1', operatorName: 'Ann', operatorAvatarUrl: null }));
    expectCatalogue(assigned);
    const state = fold(created(), assigned);
    expect(state.status).to.equal('in_progress');
    expect(errorOf(decide(state, { kind: 'force_take', operatorId: 'o1' }))).to.equal('VALIDATION_ERROR');
    const taken = events(decide(state, { kind: 'force_take', operatorId: 'o2' }));
    expect(taken[0]?.data).to.deep.equal({ ticket_id: T, operator_id: 'o2', previous_operator_id: 'o1' });
    expectCatalogue(events(decide(state, { kind: 'transfer', departmentId: 'd1', departmentName: 'Sales', operatorId: null, operatorName: null })));
    expect(errorOf(decide(inStatus('closed'), { kind: 'assign', operatorId: 'o1', operatorName: 'Ann', operatorAvatarUrl: null }))).to.equal('TICKET_INVALID_STATUS_TRANSITION');
  });
});

describe('monthly ticket quota', () => {
  it('grants claims in arrival order up to each limit', () => {
    expect(grantClaims(0, [2, 2, 2])).to.deep.equal([true, true, false]);
    expect(grantClaims(3, [3, 5])).to.deep.equal([false, true]);
    expect(grantClaims(0, [0])).to.deep.equal([false]);
  });
});
