// A short crash torture in every test run (the long one is `npm run torture -- --cycles 50`): the real
// embedded service is killed with SIGKILL three times under mixed traffic from concurrent clients,
// long polls and webhook subscriptions, and restarted on its data folder. Nothing acknowledged may be
// lost or doubled, offsets only increase, every event reaches its subscriptions, signed, and nothing
// reaches a deleted one.
import { expect } from 'chai';
import { VIOLATIONS } from '../../scripts/torture/findings.js';
import { runTorture } from '../../scripts/torture/main.js';

describe('crash torture: kill -9 under traffic (e2e, server processes)', function () {
  this.timeout(120_000);

  it('loses nothing acknowledged and violates nothing across 3 crashes', async () => {
    const seed = Math.floor(Math.random() * 2 ** 31);
    const { summary, findings, outputs } = await runTorture({ cycles: 3, secondsPerCycle: 3, seed, settleSeconds: 10, clientsPerWorkspace: 6, log: () => undefined });
    const found = Object.entries(findings)
      .filter(([, f]) => f.size > 0)
      .map(([kind, f]) => `${kind}: ${VIOLATIONS[kind as keyof typeof VIOLATIONS]}\n  ${[...f.values()].slice(0, 5).join('\n  ')}`);
    const report = `seed ${seed}; repeat with npm run torture -- --cycles 3 --seconds-per-cycle 3 --seed ${seed}\n${JSON.stringify(summary)}\n${found.join('\n')}\n${outputs}`;
    expect(found, report).to.deep.equal([]);
    expect(summary.lost, report).to.equal(0);
    expect(summary.cycles).to.equal(3);
    expect(summary.acknowledged, report).to.be.greaterThan(100);
    expect(summary.events_checked, report).to.be.greaterThan(100);
    expect(summary.deliveries_received, report).to.be.greaterThan(100);
  });
});
