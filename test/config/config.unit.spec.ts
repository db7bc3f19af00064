import { expect } from 'chai';
import { ConfigError, loadConfig, parseDuration } from '../../src/config/config.js';

describe('configuration', () => {
  it('has the contract defaults', () => {
    const config = loadConfig({});
    expect(config.port).to.equal(8080);
    expect(config.role).to.equal('all');
    expect(config.rateLimit).to.deep.equal({ perKey: 20_000, perIp: 1_000, windowMs: 60_000 });
    expect(config.webhooks.retryDelaysMs).to.deep.equal([30_000, 120_000, 600_000, 3_600_000, 21_600_000]);
    expect(config.webhooks.timeoutMs).to.equal(10_000);
    expect(config.mediaMaxBytes).to.equal(200 * 1024 * 1024);
    expect(config.mediaSigningKey).to.equal(null);
    expect(config.defaultPlan).to.equal('free');
    expect(config.adminToken).to.equal(null);
    expect(config.http).to.deep.equal({ headersTimeoutMs: 15_000, requestTimeoutMs: 300_000, listenBacklog: 4096 });
    expect(loadConfig({ HTTP_REQUEST_TIMEOUT_MS: '5000' }).http).to.deep.equal({ headersTimeoutMs: 5_000, requestTimeoutMs: 5_000, listenBacklog: 4096 });
  });

  it('parses durations with units', () => {
    expect(parseDuration('X', '250ms')).to.equal(250);
    expect(parseDuration('X', '1.5s')).to.equal(1500);
    expect(parseDuration('X', '2m')).to.equal(120_000);
    expect(parseDuration('X', '6h')).to.equal(21_600_000);
    expect(parseDuration('X', '30d')).to.equal(30 * 86_400_000);
    expect(parseDuration('X', '1mo')).to.equal(30 * 86_400_000);
  });

  it('takes the billing period from BILLING_PERIOD: one month (30 days) by default, seconds for tests', () => {
    expect(loadConfig({}).billing).to.deep.equal({ periodMs: 30 * 86_400_000 });
    expect(loadConfig({ BILLING_PERIOD: '30s' }).billing.periodMs).to.equal(30_000);
    expect(loadConfig({ BILLING_PERIOD: '10m' }).billing.periodMs).to.equal(600_000);
    expect(loadConfig({ BILLING_PERIOD: '1h' }).billing.periodMs).to.equal(3_600_000);
    expect(loadConfig({ BILLING_PERIOD: '2mo' }).billing.periodMs).to.equal(60 * 86_400_000);
  });

  const refuses = (env: Record<string, string>, variable: string) => {
    expect(() => loadConfig(env)).to.throw(ConfigError).with.property('variable', variable);
  };

  it('names the variable of a bad value', () => {
    refuses({ PORT: 'eighty' }, 'PORT');
    refuses({ PORT: '70000' }, 'PORT');
    refuses({ ROLE: 'boss' }, 'ROLE');
    refuses({ WEBHOOK_RETRY_DELAYS: '1s,2s' }, 'WEBHOOK_RETRY_DELAYS');
    refuses({ WEBHOOK_RETRY_DELAYS: '1s,2s,3s,4s,5 parsecs' }, 'WEBHOOK_RETRY_DELAYS');
    refuses({ WEBHOOK_ALLOWED_NETWORKS: '10.0.0.0/33' }, 'WEBHOOK_ALLOWED_NETWORKS');
    refuses({ WEBHOOK_ALLOWED_NETWORKS: 'localhost' }, 'WEBHOOK_ALLOWED_NETWORKS');
    refuses({ EVENTSTORE_URL: 'http://x' }, 'EVENTSTORE_URL');
    refuses({ KAFKA_BROKERS: 'nohost' }, 'KAFKA_BROKERS');
    refuses({ KAFKA_SESSION_TIMEOUT_MS: '5999' }, 'KAFKA_SESSION_TIMEOUT_MS');
    for (const bad of ['-1', '20', '1.5', 'low']) refuses({ API_THREAD_NICE: bad }, 'API_THREAD_NICE');
    refuses({ MAINTENANCE_MODE: 'perhaps' }, 'MAINTENANCE_MODE');
    refuses({ PLANS: 'free:ten:false' }, 'PLANS');
    refuses({ WEBHOOK_SECRET_KEY: 'short' }, 'WEBHOOK_SECRET_KEY');
    refuses({ MEDIA_SIGNING_KEY: 'zz'.repeat(32) }, 'MEDIA_SIGNING_KEY');
    refuses({ HTTP_HEADERS_TIMEOUT_MS: '99' }, 'HTTP_HEADERS_TIMEOUT_MS');
    refuses({ HTTP_LISTEN_BACKLOG: '0' }, 'HTTP_LISTEN_BACKLOG');
    refuses({ HTTP_LISTEN_BACKLOG: '65536' }, 'HTTP_LISTEN_BACKLOG');
    refuses({ HTTP_LISTEN_BACKLOG: 'many' }, 'HTTP_LISTEN_BACKLOG');
    refuses({ BILLING_PERIOD: 'monthly' }, 'BILLING_PERIOD');
    refuses({ BILLING_PERIOD: '500ms' }, 'BILLING_PERIOD');
    refuses({ BILLING_PERIOD: '0s' }, 'BILLING_PERIOD');
    refuses({ HTTP_HEADERS_TIMEOUT_MS: '6000', HTTP_REQUEST_TIMEOUT_MS: '5000' }, 'HTTP_HEADERS_TIMEOUT_MS');
  });

  it('reads the webhook subscription cap per workspace: 1 to 10000, default 20', () => {
    expect(loadConfig({}).webhooks.maxSubscriptions).to.equal(20);
    expect(loadConfig({ WEBHOOK_MAX_SUBSCRIPTIONS: '1' }).webhooks.maxSubscriptions).to.equal(1);
    expect(loadConfig({ WEBHOOK_MAX_SUBSCRIPTIONS: '10000' }).webhooks.maxSubscriptions).to.equal(10_000);
    for (const bad of ['0', '10001', '-1', '2.5', 'twenty']) refuses({ WEBHOOK_MAX_SUBSCRIPTIONS: bad }, 'WEBHOOK_MAX_SUBSCRIPTIONS');
  });

  it('reads the request thread’s nice value: 19 embedded, 0 for an API server, 0 to 19 when set', () => {
    expect(loadConfig({}).apiThreadNice).to.equal(19);
    expect(loadConfig({ ROLE: 'api' }).apiThreadNice).to.equal(0);
    expect(loadConfig({ ROLE: 'api', API_THREAD_NICE: '19' }).apiThreadNice).to.equal(19);
    expect(loadConfig({ API_THREAD_NICE: '0' }).apiThreadNice).to.equal(0);
  });

  it('reads the replay lease of the distributed dispatchers: 1000 to 600000 ms, default 10 s', () => {
    expect(loadConfig({}).webhooks.replayLeaseMs).to.equal(10_000);
    expect(loadConfig({ WEBHOOK_REPLAY_LEASE_MS: '1000' }).webhooks.replayLeaseMs).to.equal(1_000);
    for (const bad of ['999', '600001', '2s', 'long']) refuses({ WEBHOOK_REPLAY_LEASE_MS: bad }, 'WEBHOOK_REPLAY_LEASE_MS');
  });

  it('reads the backpressure of the embedded delivery thread: late 0 (off) to 60000 ms, default 50; a hold of 1 to 60000 ms, default 1 s', () => {
    expect(loadConfig({}).webhooks.backpressure).to.deep.equal({ lateMs: 50, maxHoldMs: 250 });
    expect(loadConfig({ WEBHOOK_BACKPRESSURE_LATE_MS: '0', WEBHOOK_BACKPRESSURE_MAX_HOLD_MS: '1000' }).webhooks.backpressure).to.deep.equal({ lateMs: 0, maxHoldMs: 1_000 });
    for (const bad of ['-1', '60001', '50ms', 'soon']) refuses({ WEBHOOK_BACKPRESSURE_LATE_MS: bad }, 'WEBHOOK_BACKPRESSURE_LATE_MS');
    for (const bad of ['0', '60001', '1s']) refuses({ WEBHOOK_BACKPRESSURE_MAX_HOLD_MS: bad }, 'WEBHOOK_BACKPRESSURE_MAX_HOLD_MS');
  });

  it('reads the delivery history retention: a duration, default 30 days', () => {
    expect(loadConfig({}).webhooks.historyRetentionMs).to.equal(30 * 86_400_000);
    expect(loadConfig({ WEBHOOK_HISTORY_RETENTION: '2s' }).webhooks.historyRetentionMs).to.equal(2_000);
    for (const bad of ['0s', '500ms', 'forever', '-1d']) refuses({ WEBHOOK_HISTORY_RETENTION: bad }, 'WEBHOOK_HISTORY_RETENTION');
  });

  it('reads the deliveries in flight per workspace: 1 to 100000, default 64', () => {
    expect(loadConfig({}).webhooks.maxInFlightPerWorkspace).to.equal(64);
    expect(loadConfig({ WEBHOOK_MAX_IN_FLIGHT_PER_WORKSPACE: '8' }).webhooks.maxInFlightPerWorkspace).to.equal(8);
    for (const bad of ['0', '100001', 'many']) refuses({ WEBHOOK_MAX_IN_FLIGHT_PER_WORKSPACE: bad }, 'WEBHOOK_MAX_IN_FLIGHT_PER_WORKSPACE');
  });

  it('reads previous webhook secret keys: none by default, a comma-separated list of 64-hex keys', () => {
    expect(loadConfig({}).webhooks.previousSecretKeys).to.deep.equal([]);
    const [a, b] = ['a1'.repeat(32), 'B2'.repeat(32)];
    expect(loadConfig({ WEBHOOK_PREVIOUS_SECRET_KEYS: ` ${a} , ${b} ` }).webhooks.previousSecretKeys).to.deep.equal([a, b]);
  });

  it('refuses a bad previous key by its place, without showing it', () => {
    const almost = 'a1'.repeat(31);
    for (const bad of [almost, `${'a1'.repeat(32)},${almost}`, `${'a1'.repeat(32)},`]) refuses({ WEBHOOK_PREVIOUS_SECRET_KEYS: bad }, 'WEBHOOK_PREVIOUS_SECRET_KEYS');
    expect(() => loadConfig({ WEBHOOK_PREVIOUS_SECRET_KEYS: `${'a1'.repeat(32)},${almost}` }))
      .to.throw(ConfigError, 'WEBHOOK_PREVIOUS_SECRET_KEYS: entry 2 of 2: expected 64 hex characters')
      .with.property('message')
      .that.does.not.include(almost);
  });

  it('accepts CIDR lists and plan tables', () => {
    const config = loadConfig({ WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8, ::1/128', PLANS: 'mini:3:false,max:9:true' });
    expect(config.webhooks.allowedNetworks).to.deep.equal(['127.0.0.0/8', '::1/128']);
    expect(config.plans).to.deep.equal({ mini: { ticketsPerMonth: 3, knowledgeBase: false }, max: { ticketsPerMonth: 9, knowledgeBase: true } });
    expect(config.defaultPlan).to.equal('mini');
  });
});
