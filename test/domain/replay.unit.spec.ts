// The replay aggregate: a request fixes its range, progress only moves forward, a settled replay
// takes no more steps, and the request's refusals (unknown types, until before since); one replay
// folded out of an older release's stream of several.
import { expect } from 'chai';
import { foldReplay, replayAggregate, replayEventId, type Replay, type ReplayCommand } from '../../src/domain/replay/replay.js';

const request: ReplayCommand = { kind: 'request', replayId: 'r1', subscriptionId: 's1', since: 100, until: null, throughPosition: 42, types: [], onlyFailed: false, at: 7 };

const run = (state: Replay | null, command: ReplayCommand) => {
  const result = replayAggregate.decide(command, state);
  if (result._tag === 'Left') throw new Error(result.left.message);
  return { events: result.right, state: result.right.reduce(replayAggregate.evolve, state) };
};

describe('replay aggregate (unit)', () => {
  it('records a request with its range and counts, then progress, then completion', () => {
    let { state } = run(replayAggregate.initial, request);
    expect(state).to.include({ status: 'running', since: 100, until: null, throughPosition: 42, cursor: 99, matched: 0, requestedAt: 7 });
    ({ state } = run(state, { kind: 'progress', replayId: 'r1', cursor: 150, matched: 3 }));
    expect(state).to.include({ cursor: 150, matched: 3 });
    ({ state } = run(state, { kind: 'complete', replayId: 'r1', at: 9 }));
    expect(state).to.include({ status: 'completed', finishedAt: 9 });
  });

  it('never moves progress back, takes nothing once settled, and is idempotent per request', () => {
    let { state } = run(replayAggregate.initial, request);
    expect(run(state, request).events).to.deep.equal([]);
    ({ state } = run(state, { kind: 'progress', replayId: 'r1', cursor: 150, matched: 3 }));
    expect(run(state, { kind: 'progress', replayId: 'r1', cursor: 120, matched: 1 }).events).to.deep.equal([]);
    // A step recorded twice (a driver taken over) folds once.
    const [progressed] = run(state, { kind: 'progress', replayId: 'r1', cursor: 200, matched: 4 }).events;
    const twice = foldReplay([...run(replayAggregate.initial, request).events, progressed!, progressed!], 'r1');
    expect(twice).to.include({ cursor: 200, matched: 4 });
    // The log drops the second record of a step: its id is the same, and differs from the next step's.
    const [next] = run(state, { kind: 'progress', replayId: 'r1', cursor: 201, matched: 4 }).events;
    expect(replayEventId(progressed!)).to.not.equal(replayEventId(next!));
    ({ state } = run(state, { kind: 'cancel', replayId: 'r1', reason: 'subscription_inactive', at: 10 }));
    expect(state).to.include({ status: 'cancelled', reason: 'subscription_inactive' });
    expect(run(state, { kind: 'complete', replayId: 'r1', at: 11 }).events).to.deep.equal([]);
    expect(run(state, { kind: 'progress', replayId: 'r1', cursor: 300, matched: 9 }).events).to.deep.equal([]);
  });

  it("folds one replay out of an older release's stream that holds every replay of the subscription", () => {
    const first = run(replayAggregate.initial, request);
    const other = run(replayAggregate.initial, { ...request, replayId: 'r2', since: 500 });
    const progressed = run(first.state, { kind: 'progress', replayId: 'r1', cursor: 150, matched: 3 });
    const otherDone = run(other.state, { kind: 'complete', replayId: 'r2', at: 9 });
    const stream = [...first.events, ...other.events, ...progressed.events, ...otherDone.events];
    expect(foldReplay(stream, 'r1')).to.include({ id: 'r1', status: 'running', cursor: 150, matched: 3 });
    expect(foldReplay(stream, 'r2')).to.include({ id: 'r2', status: 'completed', cursor: 499 });
    expect(foldReplay(stream, 'r3')).to.equal(null);
    // Caught up from a state folded before: the same as folding the whole stream.
    expect(foldReplay(stream.slice(2), 'r1', foldReplay(stream.slice(0, 2), 'r1'))).to.deep.equal(foldReplay(stream, 'r1'));
  });

  it('refuses unknown event names, until before since, and steps of an unknown replay', () => {
    const unknown = replayAggregate.decide({ ...request, types: ['ticket.created', 'nope'] }, replayAggregate.initial);
    expect(unknown._tag === 'Left' && unknown.left).to.deep.include({ code: 'VALIDATION_ERROR' });
    expect(unknown._tag === 'Left' && unknown.left.detail?.['unknown']).to.deep.equal(['nope']);
    const backwards = replayAggregate.decide({ ...request, until: 50 }, replayAggregate.initial);
    expect(backwards._tag).to.equal('Left');
    const stray = replayAggregate.decide({ kind: 'complete', replayId: 'r9', at: 1 }, replayAggregate.initial);
    expect(stray._tag === 'Left' && stray.left.code).to.equal('CONFLICT');
  });
});
