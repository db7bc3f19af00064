// Configuration from the environment, parsed and checked once at start-up. A bad value stops
// start-up with a message naming the variable. Every variable is listed in the README.
import { isIP } from 'node:net';
import * as path from 'node:path';

export type Role = 'all' | 'api' | 'relay' | 'dispatcher';

export interface Config {
  readonly role: Role;
  readonly port: number;
  readonly host: string;
  readonly dataDir: string;
  readonly adminToken: string | null;
  readonly eventstoreUrl: string | null;
  readonly redisUrl: string | null;
  readonly kafkaBrokers: readonly string[] | null;
  readonly kafkaTopic: string;
  readonly kafkaGroup: string;
  readonly kafkaSessionTimeoutMs: number;
  /** The request thread's nice value (ROLE=all and api): delivery keeps the process's (0), so it goes first when the cores are short. */
  readonly apiThreadNice: number;
  readonly maintenanceMode: boolean;
  readonly trustProxy: boolean;
  readonly bodyLimitBytes: number;
  /** Time a client has to send a request's headers, and the whole request (body included); connections the kernel queues while the process is busy. */
  readonly http: { readonly headersTimeoutMs: number; readonly requestTimeoutMs: number; readonly listenBacklog: number };
  /** How long an Idempotency-Key claim may run before a retry may take it over (its holder looks stalled). */
  readonly idempotencyLeaseMs: number;
  readonly rateLimit: { readonly perKey: number; readonly perIp: number; readonly windowMs: number };
  readonly mediaMaxBytes: number;
  /** The key that signs media links of internal notes (64 hex), or null: generated into the data folder. */
  readonly mediaSigningKey: string | null;
  readonly plans: Readonly<Record<string, PlanLimits>>;
  readonly defaultPlan: string;
  /** A paid plan's period: what a renewal adds to its expiry (BILLING_PERIOD). */
  readonly billing: { readonly periodMs: number };
  readonly webhooks: {
    readonly retryDelaysMs: readonly number[];
    readonly timeoutMs: number;
    readonly allowedNetworks: readonly string[];
    readonly maxInFlight: number;
    readonly maxInFlightPerSubscription: number;
    readonly maxInFlightPerWorkspace: number;
    /** Subscriptions one workspace may have at once (deleted ones free their slot). */
    readonly maxSubscriptions: number;
    readonly secretKey: string | null;
    /** Keys that sealed secrets before WEBHOOK_SECRET_KEY: they still open them, and those are re-sealed with the current key. */
    readonly previousSecretKeys: readonly string[];
    /** How long delivery history stays in the index the deliveries route reads (the log keeps its records). */
    readonly historyRetentionMs: number;
    /** How long a replay's lease outlives its dispatcher (shared in Redis): then another dispatcher continues it. */
    readonly replayLeaseMs: number;
    /**
     * A delivery engine (the embedded thread, or a dispatcher with Redis) asks for writes to be held
     * while it is this late (ms) and busy (0: never); an API server holds each for at most `maxHoldMs`
     * (src/webhooks/dispatch/backpressure.ts).
     */
    readonly backpressure: { readonly lateMs: number; readonly maxHoldMs: number };
  };
}

export interface PlanLimits {
  readonly ticketsPerMonth: number;
  readonly knowledgeBase: boolean;
}

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`${variable}: ${message}`);
    this.name = 'ConfigError';
  }
}

type Env = Readonly<Record<string, string | undefined>>;

const present = (env: Env, name: string): string | undefined => {
  const value = env[name];
  return value === undefined || value.trim() === '' ? undefined : value.trim();
};

const integer = (env: Env, name: string, fallback: number, min: number, max: number): number => {
  const raw = present(env, name);
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(n) || n < min || n > max) {
    throw new ConfigError(name, `expected an integer from ${min} to ${max}, got "${raw}"`);
  }
  return n;
};

const boolean = (env: Env, name: string, fallback: boolean): boolean => {
  const raw = present(env, name)?.toLowerCase();
  if (raw === undefined) return fallback;
  if (['1', 'true', 'yes', 'on'].includes(raw)) return true;
  if (['0', 'false', 'no', 'off'].includes(raw)) return false;
  throw new ConfigError(name, `expected true or false, got "${raw}"`);
};

const DAY_MS = 86_400_000;
/** A month is 30 days. */
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: DAY_MS, mo: 30 * DAY_MS };

/** "30s" → 30000; units ms, s, m, h, d and mo (30 days). */
export const parseDuration = (name: string, raw: string): number => {
  const match = /^(\d+(?:\.\d+)?)(ms|s|mo|m|h|d)$/.exec(raw.trim());
  const unit = match?.[2];
  if (match === null || unit === undefined) throw new ConfigError(name, `"${raw}" is not a duration like 500ms, 30s, 2m, 1h, 30d or 1mo`);
  return Math.round(Number(match[1]) * (UNIT_MS[unit] ?? 1));
};

/** One duration of at least `minMs` (and at most ten years). */
const duration = (env: Env, name: string, fallback: string, minMs: number): number => {
  const ms = parseDuration(name, present(env, name) ?? fallback);
  if (ms < minMs || ms > 3650 * DAY_MS) throw new ConfigError(name, `expected a duration from ${minMs} ms to 3650d, got ${ms} ms`);
  return ms;
};

const durations = (env: Env, name: string, fallback: string, count: number): number[] => {
  const raw = present(env, name) ?? fallback;
  const parts = raw.split(',').map((p) => p.trim());
  if (parts.length !== count) throw new ConfigError(name, `expected ${count} comma-separated durations, got ${parts.length}`);
  return parts.map((p) => parseDuration(name, p));
};

const CIDR = /^(.+)\/(\d{1,3})$/;

const cidrList = (env: Env, name: string): string[] => {
  const raw = present(env, name);
  if (raw === undefined) return [];
  return raw.split(',').map((entry) => {
    const cidr = entry.trim();
    const match = CIDR.exec(cidr);
    const family = match?.[1] === undefined ? 0 : isIP(match[1]);
    const bits = Number(match?.[2]);
    if (family === 0 || bits > (family === 4 ? 32 : 128)) throw new ConfigError(name, `"${cidr}" is not a CIDR block like 127.0.0.0/8`);
    return cidr;
  });
};

const url = (env: Env, name: string, protocols: readonly string[]): string | null => {
  const raw = present(env, name);
  if (raw === undefined) return null;
  try {
    const parsed = new URL(raw);
    if (!protocols.includes(parsed.protocol)) throw new Error();
  } catch {
    throw new ConfigError(name, `expected a URL with scheme ${protocols.join(' or ')}, got "${raw}"`);
  }
  return raw;
};

const brokers = (env: Env, name: string): string[] | null => {
  const raw = present(env, name);
  if (raw === undefined) return null;
  return raw.split(',').map((b) => {
    const broker = b.trim();
    if (!/^[\w.-]+:\d{1,5}$/.test(broker)) throw new ConfigError(name, `"${broker}" is not host:port`);
    return broker;
  });
};

const KEY_HEX = /^[0-9a-f]{64}$/i;
const KEY_EXPECTED = 'expected 64 hex characters (a 256-bit key)';

const secretKey = (env: Env, name: string): string | null => {
  const raw = present(env, name);
  if (raw !== undefined && !KEY_HEX.test(raw)) throw new ConfigError(name, KEY_EXPECTED);
  return raw ?? null;
};

/** A comma-separated list of keys; a bad entry is named by its place, never shown (it may be a real key). */
const secretKeys = (env: Env, name: string): string[] => {
  const raw = present(env, name);
  if (raw === undefined) return [];
  const keys = raw.split(',').map((k) => k.trim());
  keys.forEach((key, i) => {
    if (!KEY_HEX.test(key)) throw new ConfigError(name, `entry ${i + 1} of ${keys.length}: ${KEY_EXPECTED}`);
  });
  return keys;
};

/**
 * Connections the kernel completes and queues while the event loop is busy. Node's default, 511, was
 * too few: a loop held for a second under 220 requests/s made clients open 700 connections, the
 * kernel dropped those past the queue, and their SYN retransmits (1 s, 3 s, 7 s) turned the second
 * into ten. The kernel caps it at net.core.somaxconn (4096 on Linux since 5.4).
 */
const DEFAULT_LISTEN_BACKLOG = 4096;

const httpSettings = (env: Env): Config['http'] => {
  const requestTimeoutMs = integer(env, 'HTTP_REQUEST_TIMEOUT_MS', 300_000, 100, 3_600_000);
  const headersTimeoutMs = integer(env, 'HTTP_HEADERS_TIMEOUT_MS', Math.min(15_000, requestTimeoutMs), 100, 600_000);
  // Headers are part of the request: their deadline cannot be the later one (Node refuses it too).
  if (headersTimeoutMs > requestTimeoutMs) throw new ConfigError('HTTP_HEADERS_TIMEOUT_MS', `must not exceed HTTP_REQUEST_TIMEOUT_MS (${requestTimeoutMs})`);
  return { headersTimeoutMs, requestTimeoutMs, listenBacklog: integer(env, 'HTTP_LISTEN_BACKLOG', DEFAULT_LISTEN_BACKLOG, 1, 65_535) };
};

const DEFAULT_PLANS = 'free:100:false,team:5000:true,business:100000:true';

/** PLANS="name:tickets_per_month:knowledge_base,…"; the first plan is the entry plan. */
const plans = (env: Env, name: string): Record<string, PlanLimits> => {
  const raw = present(env, name) ?? DEFAULT_PLANS;
  const result: Record<string, PlanLimits> = {};
  for (const entry of raw.split(',')) {
    const match = /^([a-z][a-z0-9_-]*):(\d+):(true|false)$/.exec(entry.trim());
    if (match === null) throw new ConfigError(name, `"${entry}" is not name:tickets_per_month:true|false`);
    result[match[1] as string] = { ticketsPerMonth: Number(match[2]), knowledgeBase: match[3] === 'true' };
  }
  return result;
};

const ROLES: readonly Role[] = ['all', 'api', 'relay', 'dispatcher'];

export const loadConfig = (env: Env = process.env): Config => {
  const role = (present(env, 'ROLE') ?? 'all') as Role;
  if (!ROLES.includes(role)) throw new ConfigError('ROLE', `expected one of ${ROLES.join(', ')}, got "${role}"`);
  const planTable = plans(env, 'PLANS');
  return {
    role,
    port: integer(env, 'PORT', 8080, 0, 65535),
    host: present(env, 'HOST') ?? '0.0.0.0',
    dataDir: path.resolve(present(env, 'DATA_DIR') ?? './data'),
    adminToken: present(env, 'ADMIN_TOKEN') ?? null,
    eventstoreUrl: url(env, 'EVENTSTORE_URL', ['esdb:', 'esdb+discover:']),
    redisUrl: url(env, 'REDIS_URL', ['redis:', 'rediss:']),
    kafkaBrokers: brokers(env, 'KAFKA_BROKERS'),
    kafkaTopic: present(env, 'KAFKA_TOPIC') ?? 'support-events',
    kafkaGroup: present(env, 'KAFKA_GROUP') ?? 'webhook-dispatchers',
    // Kafka's brokers refuse a session outside group.min/max.session.timeout.ms (6 s and 30 min by default).
    kafkaSessionTimeoutMs: integer(env, 'KAFKA_SESSION_TIMEOUT_MS', 30_000, 6_000, 300_000),
    // An API server usually has a host of its own, and the dispatchers theirs.
    apiThreadNice: integer(env, 'API_THREAD_NICE', role === 'all' ? 19 : 0, 0, 19),
    maintenanceMode: boolean(env, 'MAINTENANCE_MODE', false),
    trustProxy: boolean(env, 'TRUST_PROXY', false),
    bodyLimitBytes: integer(env, 'BODY_LIMIT_BYTES', 1_048_576, 1024, 104_857_600),
    http: httpSettings(env),
    idempotencyLeaseMs: integer(env, 'IDEMPOTENCY_LEASE_MS', 60_000, 100, 3_600_000),
    rateLimit: {
      perKey: integer(env, 'RATE_LIMIT_PER_KEY', 20_000, 1, 1_000_000_000),
      perIp: integer(env, 'RATE_LIMIT_PER_IP', 1_000, 1, 1_000_000_000),
      windowMs: integer(env, 'RATE_LIMIT_WINDOW_MS', 60_000, 1, 86_400_000),
    },
    mediaMaxBytes: integer(env, 'MEDIA_MAX_BYTES', 200 * 1024 * 1024, 1, 10 * 1024 ** 3),
    mediaSigningKey: secretKey(env, 'MEDIA_SIGNING_KEY'),
    plans: planTable,
    defaultPlan: Object.keys(planTable)[0] as string,
    billing: { periodMs: duration(env, 'BILLING_PERIOD', '1mo', 1000) },
    webhooks: {
      retryDelaysMs: durations(env, 'WEBHOOK_RETRY_DELAYS', '30s,2m,10m,1h,6h', 5),
      timeoutMs: integer(env, 'WEBHOOK_TIMEOUT_MS', 10_000, 1, 600_000),
      allowedNetworks: cidrList(env, 'WEBHOOK_ALLOWED_NETWORKS'),
      maxInFlight: integer(env, 'WEBHOOK_MAX_IN_FLIGHT', 256, 1, 100_000),
      maxInFlightPerSubscription: integer(env, 'WEBHOOK_MAX_IN_FLIGHT_PER_SUBSCRIPTION', 16, 1, 10_000),
      maxInFlightPerWorkspace: integer(env, 'WEBHOOK_MAX_IN_FLIGHT_PER_WORKSPACE', 64, 1, 100_000),
      // GitHub allows 20 hooks per event and repository: every event fans out to each subscription.
      maxSubscriptions: integer(env, 'WEBHOOK_MAX_SUBSCRIPTIONS', 20, 1, 10_000),
      secretKey: secretKey(env, 'WEBHOOK_SECRET_KEY'),
      previousSecretKeys: secretKeys(env, 'WEBHOOK_PREVIOUS_SECRET_KEYS'),
      historyRetentionMs: duration(env, 'WEBHOOK_HISTORY_RETENTION', '30d', 1000),
      replayLeaseMs: integer(env, 'WEBHOOK_REPLAY_LEASE_MS', 10_000, 1_000, 600_000),
      backpressure: {
        lateMs: integer(env, 'WEBHOOK_BACKPRESSURE_LATE_MS', 50, 0, 60_000),
        maxHoldMs: integer(env, 'WEBHOOK_BACKPRESSURE_MAX_HOLD_MS', 250, 1, 60_000),
      },
    },
  };
};

/** Every environment variable loadConfig reads (docker-compose.yml sets only these; a test checks both). */
export const CONFIG_VARIABLES = [
  'ROLE',
  'PORT',
  'HOST',
  'DATA_DIR',
  'ADMIN_TOKEN',
  'EVENTSTORE_URL',
  'REDIS_URL',
  'KAFKA_BROKERS',
  'KAFKA_TOPIC',
  'KAFKA_GROUP',
  'KAFKA_SESSION_TIMEOUT_MS',
  'API_THREAD_NICE',
  'MAINTENANCE_MODE',
  'TRUST_PROXY',
  'BODY_LIMIT_BYTES',
  'HTTP_HEADERS_TIMEOUT_MS',
  'HTTP_REQUEST_TIMEOUT_MS',
  'HTTP_LISTEN_BACKLOG',
  'IDEMPOTENCY_LEASE_MS',
  'RATE_LIMIT_PER_KEY',
  'RATE_LIMIT_PER_IP',
  'RATE_LIMIT_WINDOW_MS',
  'MEDIA_MAX_BYTES',
  'MEDIA_SIGNING_KEY',
  'PLANS',
  'BILLING_PERIOD',
  'WEBHOOK_RETRY_DELAYS',
  'WEBHOOK_TIMEOUT_MS',
  'WEBHOOK_ALLOWED_NETWORKS',
  'WEBHOOK_MAX_IN_FLIGHT',
  'WEBHOOK_MAX_IN_FLIGHT_PER_SUBSCRIPTION',
  'WEBHOOK_MAX_IN_FLIGHT_PER_WORKSPACE',
  'WEBHOOK_MAX_SUBSCRIPTIONS',
  'WEBHOOK_HISTORY_RETENTION',
  'WEBHOOK_REPLAY_LEASE_MS',
  'WEBHOOK_BACKPRESSURE_LATE_MS',
  'WEBHOOK_BACKPRESSURE_MAX_HOLD_MS',
  'WEBHOOK_SECRET_KEY',
  'WEBHOOK_PREVIOUS_SECRET_KEYS',
] as const;
