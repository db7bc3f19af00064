// Whether an idempotency claim's holder process is known to be gone.
import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { hostname } from 'node:os';
import { holderGone, thisHolder } from '../../src/app/holder.js';

describe('claim holders', () => {
  it('knows this process and other live processes of this machine as alive', () => {
    expect(holderGone(thisHolder)).to.equal(false);
    expect(holderGone(`${hostname()}:${process.ppid}:0123456789ab`)).to.equal(false);
  });

  it('knows a process that exited, and an earlier start under this process id, as gone', () => {
    const exited = spawnSync(process.execPath, ['-e', '']).pid;
    expect(holderGone(`${hostname()}:${exited}:0123456789ab`)).to.equal(true);
    expect(holderGone(`${hostname()}:${process.pid}:0123456789ab`)).to.equal(true);
  });

  it('cannot tell for another machine or a holder it cannot read', () => {
    expect(holderGone(`another-${hostname()}:1:0123456789ab`)).to.equal(false);
    expect(holderGone('')).to.equal(false);
  });
});
