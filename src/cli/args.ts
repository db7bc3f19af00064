// Argument readers shared by the command-line tools (scripts/export.ts, the listen command): what a
// user types becomes a value or a UsageError that says what is wrong, never a silent default.
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { PUBLIC_EVENT_TYPES, isPublicEventType, type PublicEventType } from '../domain/event-types.js';

/** A mistake in the command line: printed with the command's usage, exit code 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** parseArgs (strict: an unknown option or a missing value is refused) with its refusals as UsageErrors. */
export const parseCommandLine = <T extends ParseArgsConfig>(config: T): ReturnType<typeof parseArgs<T>>['values'] => {
  try {
    return parseArgs(config).values;
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
};

/** An offset in microseconds, or an ISO 8601 timestamp (no zone means UTC) turned into one. */
export const parseInstant = (raw: string): number => {
  if (/^\d+$/.test(raw)) {
    const n = Number(raw);
    if (Number.isSafeInteger(n)) return n;
  }
  const match = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?(Z|[+-]\d\d:\d\d)?$/.exec(raw);
  const millis = match === null ? NaN : Date.parse(`${match[1]}${match[3] ?? 'Z'}`);
  if (match === null || Number.isNaN(millis)) throw new UsageError(`"${raw}" is neither an offset in microseconds nor an ISO 8601 timestamp`);
  return millis * 1000 + Number((match[2] ?? '').padEnd(6, '0'));
};

/** Comma-separated public event types; undefined (every type) when absent or empty. */
export const parseTypes = (raw: string | undefined): PublicEventType[] | undefined => {
  if (raw === undefined) return undefined;
  const names = [...new Set(raw.split(',').map((s) => s.trim()).filter((s) => s !== ''))];
  const unknown = names.filter((n) => !isPublicEventType(n));
  if (unknown.length > 0) throw new UsageError(`unknown event types: ${unknown.join(', ')} (valid: ${PUBLIC_EVENT_TYPES.join(', ')})`);
  return names.length === 0 ? undefined : (names as PublicEventType[]);
};

/** An absolute http(s) URL as given, or a UsageError naming the option. */
export const parseHttpUrl = (option: string, raw: string): string => {
  const url = URL.canParse(raw) ? new URL(raw) : null;
  if (url === null || (url.protocol !== 'http:' && url.protocol !== 'https:')) throw new UsageError(`${option} must be an absolute http or https URL, not "${raw}"`);
  return raw;
};
