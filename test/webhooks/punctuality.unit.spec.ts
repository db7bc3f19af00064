// The delivery engine's punctuality histograms: observed in microseconds, exposed in seconds in
// Prometheus' text format, and the same after the trip a worker thread's figures make as data.
import { expect } from 'chai';
import { createPunctuality, punctualityText, PUNCTUALITY_BUCKETS } from '../../src/webhooks/dispatch/punctuality.js';

/** `name{labels} value` lines of the exposition, as a map. */
const series = (text: string): Map<string, number> =>
  new Map(
    text
      .split('\n')
      .filter((line) => line !== '' && !line.startsWith('#'))
      .map((line) => {
        const at = line.lastIndexOf(' ');
        return [line.slice(0, at), Number(line.slice(at + 1))] as const;
      }),
  );

describe('webhook punctuality histograms (unit)', () => {
  it('counts attempts by kind into cumulative buckets of seconds, through the data a thread hands over', async () => {
    const punctuality = createPunctuality();
    punctuality.started('first', 3_000); // 3 ms
    punctuality.started('first', 150_000); // 150 ms
    punctuality.started('retry', 40_000); // 40 ms
    punctuality.started('retry', 100_000); // 100 ms: on a bound, which holds it (le)
    punctuality.started('replay', 7_000_000); // 7 s
    punctuality.fannedOut(1_000);
    const text = punctualityText(structuredClone(punctuality.figures()));
    const values = series(text);
    expect(text).to.match(/^# TYPE webhook_fanout_delay_seconds histogram$/m).and.match(/^# TYPE webhook_attempt_start_delay_seconds histogram$/m);
    expect(values.get('webhook_attempt_start_delay_seconds_bucket{le="0.005",attempt="first"}')).to.equal(1);
    expect(values.get('webhook_attempt_start_delay_seconds_bucket{le="0.1",attempt="first"}')).to.equal(1);
    expect(values.get('webhook_attempt_start_delay_seconds_bucket{le="0.2",attempt="first"}')).to.equal(2);
    expect(values.get('webhook_attempt_start_delay_seconds_count{attempt="first"}')).to.equal(2);
    expect(values.get('webhook_attempt_start_delay_seconds_sum{attempt="first"}')).to.be.closeTo(0.153, 1e-9);
    expect(values.get('webhook_attempt_start_delay_seconds_bucket{le="0.05",attempt="retry"}')).to.equal(1);
    expect(values.get('webhook_attempt_start_delay_seconds_bucket{le="0.1",attempt="retry"}')).to.equal(2);
    expect(values.get('webhook_attempt_start_delay_seconds_count{attempt="retry"}')).to.equal(2);
    expect(values.get('webhook_attempt_start_delay_seconds_bucket{le="5",attempt="replay"}')).to.equal(0);
    expect(values.get('webhook_attempt_start_delay_seconds_bucket{le="10",attempt="replay"}')).to.equal(1);
    expect(values.get('webhook_fanout_delay_seconds_bucket{le="0.005"}')).to.equal(1);
    expect(values.get('webhook_fanout_delay_seconds_count')).to.equal(1);
    // Every bound is there, then +Inf.
    const bounds = [...values.keys()].filter((k) => k.startsWith('webhook_fanout_delay_seconds_bucket')).map((k) => /le="([^"]+)"/.exec(k)?.[1]);
    expect(bounds).to.deep.equal([...PUNCTUALITY_BUCKETS.map(String), '+Inf']);
  });

  it('counts a delay below zero (a clock stepped back between two threads) as none, and nothing observed as no attempt series', async () => {
    const punctuality = createPunctuality();
    punctuality.fannedOut(-2_000_000);
    const values = series(punctualityText(punctuality.figures()));
    expect(values.get('webhook_fanout_delay_seconds_bucket{le="0.005"}')).to.equal(1);
    expect(values.get('webhook_fanout_delay_seconds_sum')).to.equal(0);
    expect([...values.keys()].some((k) => k.startsWith('webhook_attempt_start_delay_seconds'))).to.equal(false);
  });
});
