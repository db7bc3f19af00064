import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { monthOf, quotaStream } from '../../src/domain/ticket/quota.js';
import { openSqliteLog } from '../../src/log/sqlite.js';
import { randomId } from '../../src/shared/ids.js';
import { createTicketQuota } from '../../src/tickets/quota.js';

const dir = mkdtempSync(join(tmpdir(), 'ticket-quota-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const NOW = Date.UTC(2026, 10, 21) * 1000;

describe('monthly ticket quota claimer (int)', () => {
  let log: ReturnType<typeof openSqliteLog>;
  beforeEach(() => {
    log = openSqliteLog({ file: join(dir, `${randomBytes(6).toString('hex')}.db`) });
  });
  afterEach(() => log.close());

  const claims = (quota: ReturnType<typeof createTicketQuota>, count: number, limit: number) =>
    Promise.all(Array.from({ length: count }, () => quota.claim('ws', limit, randomId())));

  it('grants exactly the limit when two claimers (two API servers) race on one month, in one group commit each round', async () => {
    const one = createTicketQuota(log, () => NOW, randomId);
    const two = createTicketQuota(log, () => NOW, randomId);
    const before = log.stats().transactions;
    const firstRound = await claims(one, 20, 1000);
    // Pipelined: the 20 concurrent claims of one claimer share the first commit.
    expect(log.stats().transactions - before).to.equal(1);
    expect(firstRound.every(Boolean)).to.equal(true);

    const raced = await Promise.all([claims(one, 40, 50), claims(two, 40, 50)]);
    expect(raced.flat().filter(Boolean)).to.have.length(30);
    expect(await log.readStream(quotaStream('ws', monthOf(NOW)))).to.have.length(50);
    expect(await claims(two, 3, 50)).to.deep.equal([false, false, false]);
    // A higher limit (a plan change) counts the same month further.
    expect(await claims(one, 3, 52)).to.deep.equal([true, true, false]);
  });
});
