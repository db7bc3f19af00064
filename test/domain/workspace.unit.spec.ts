import { expect } from 'chai';
import { workspaceAggregate, type WorkspaceCommand, type WorkspaceState } from '../../src/domain/workspace/workspace.js';
import { evolveWorkspaceRow } from '../../projections/workspace-directory.js';

const { decide, evolve, initial } = workspaceAggregate;

const run = (state: WorkspaceState, command: WorkspaceCommand) => {
  const decision = decide(command, state);
  if (decision._tag === 'Left') throw new Error(decision.left.code);
  return { events: decision.right, state: decision.right.reduce(evolve, state) };
};

describe('workspace aggregate', () => {
  const created = run(initial, { kind: 'create', name: 'Acme', plan: 'free', keyId: 'k1', keyHash: 'h1', at: 'now' });

  it('creates a workspace with its first key, stored as a hash', () => {
    expect(created.events.map((e) => e.type)).to.deep.equal(['workspace.created', 'api_key.issued']);
    expect(created.events[1]?.data).to.deep.equal({ key_id: 'k1', key_hash: 'h1', created_at: 'now' });
    expect(created.state.keys).to.deep.equal({ k1: 'active' });
  });

  it('creates once: a repeated create decides nothing', () => {
    expect(run(created.state, { kind: 'create', name: 'Acme', plan: 'free', keyId: 'k2', keyHash: 'h2', at: 'now' }).events).to.deep.equal([]);
  });

  it('disables, re-enables and deletes keys, and refuses unknown or deleted ones', () => {
    const disabled = run(created.state, { kind: 'set_key_status', keyId: 'k1', status: 'disabled' });
    expect(disabled.events.map((e) => e.type)).to.deep.equal(['api_key.disabled']);
    expect(run(disabled.state, { kind: 'set_key_status', keyId: 'k1', status: 'disabled' }).events).to.deep.equal([]);
    const deleted = run(disabled.state, { kind: 'set_key_status', keyId: 'k1', status: 'deleted' });
    expect(deleted.state.keys['k1']).to.equal('deleted');
    expect(() => run(deleted.state, { kind: 'set_key_status', keyId: 'k1', status: 'active' })).to.throw('VALIDATION_ERROR');
    expect(() => run(created.state, { kind: 'set_key_status', keyId: 'nope', status: 'active' })).to.throw('VALIDATION_ERROR');
  });

  it('blocks and unblocks only on change', () => {
    const blocked = run(created.state, { kind: 'set_blocked', blocked: true });
    expect(blocked.events.map((e) => e.type)).to.deep.equal(['workspace.blocked']);
    expect(run(blocked.state, { kind: 'set_blocked', blocked: true }).events).to.deep.equal([]);
  });

  it('refuses commands on a workspace that does not exist', () => {
    expect(() => run(initial, { kind: 'set_plan', plan: 'team' })).to.throw('WORKSPACE_NOT_FOUND');
  });

  it('the directory row follows the same events', () => {
    const events = [...created.events, ...run(created.state, { kind: 'set_key_status', keyId: 'k1', status: 'disabled' }).events];
    const row = events.reduce((r, e) => evolveWorkspaceRow(r, { ...e, workspaceId: 'w1' }), undefined as ReturnType<typeof evolveWorkspaceRow>);
    expect(row).to.deep.include({ id: 'w1', name: 'Acme', plan: 'free', blocked: false });
    expect(row?.keys).to.deep.equal({ k1: { hash: 'h1', status: 'disabled' } });
  });
});
