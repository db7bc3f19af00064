import { expect } from 'chai';
import { progressReporter } from '../../src/cli/progress.js';

describe('progressReporter (unit)', () => {
  it('prints the count and a rate once the interval has passed', () => {
    const printed: string[] = [];
    const report = progressReporter('exported', 0, (line) => printed.push(line));
    report(10);
    report(20);
    expect(printed).to.have.length(2);
    expect(printed[1]).to.match(/^exported: 20 events so far \(\d+ events\/s\)$/);
  });

  it('stays silent within the interval', () => {
    const printed: string[] = [];
    const report = progressReporter('rebuilt', 60_000, (line) => printed.push(line));
    for (let i = 0; i < 100; i += 1) report(i);
    expect(printed).to.deep.equal([]);
  });
});
