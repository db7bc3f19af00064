// Validation at the edge: io-ts decoding whose failures become the contract's schema 422
// {detail: [{type, loc, msg}]}. Inside the service, decoded values are trusted.
import * as t from 'io-ts';
import { invalid, type Problem } from './api-error.js';
import { describedAs } from './json-schema.js';

export type Location = 'body' | 'query' | 'path' | 'header';

const isIndexedComposite = (type: t.Decoder<unknown, unknown>): boolean =>
  type instanceof t.UnionType || type instanceof t.IntersectionType;

const describe = (type: t.Decoder<unknown, unknown>): string => {
  if (type instanceof t.KeyofType) return `one of ${Object.keys(type.keys).map((k) => `'${k}'`).join(', ')}`;
  return type.name;
};

const problemOf = (root: Location, error: t.ValidationError): Problem => {
  const loc: (string | number)[] = [root];
  error.context.forEach((entry, i) => {
    const parent = error.context[i - 1];
    if (i === 0 || (parent !== undefined && isIndexedComposite(parent.type))) return;
    loc.push(/^\d+$/.test(entry.key) && parent?.type instanceof t.ArrayType ? Number(entry.key) : entry.key);
  });
  const leaf = error.context.at(-1);
  if (error.value === undefined) return { type: 'missing', loc, msg: 'Field required' };
  const expected = leaf === undefined ? 'a valid value' : describe(leaf.type);
  return { type: leaf?.type instanceof t.KeyofType ? 'enum' : 'type_error', loc, msg: error.message ?? `Input should be ${expected}` };
};

/** Top-level property names a codec declares, for rejecting unknown fields; null when not an object codec. */
const propsOf = (codec: t.Mixed): Set<string> | null => {
  if (codec instanceof t.InterfaceType || codec instanceof t.PartialType || codec instanceof t.ExactType) {
    const inner = codec instanceof t.ExactType ? (codec.type as t.Mixed) : codec;
    if (inner instanceof t.InterfaceType || inner instanceof t.PartialType) return new Set(Object.keys(inner.props as object));
    return propsOf(inner);
  }
  if (codec instanceof t.IntersectionType) {
    const all = new Set<string>();
    for (const member of codec.types as t.Mixed[]) {
      const props = propsOf(member);
      if (props === null) return null;
      props.forEach((p) => all.add(p));
    }
    return all;
  }
  if (codec instanceof t.RefinementType) return propsOf(codec.type as t.Mixed);
  return null;
};

const dedupe = (problems: Problem[]): Problem[] => {
  const seen = new Set<string>();
  return problems.filter((p) => {
    const key = JSON.stringify(p.loc);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
};

/** The most problems one answer lists: a body with 80,000 unknown keys must not answer 7 MB. */
const MAX_PROBLEMS = 50;

const listed = (where: Location, problems: Problem[]): Problem[] =>
  problems.length <= MAX_PROBLEMS
    ? problems
    : [...problems.slice(0, MAX_PROBLEMS), { type: 'too_many_errors', loc: [where], msg: `${problems.length - MAX_PROBLEMS} more problems not listed` }];

/**
 * Decodes `value` or throws the schema 422. Unknown top-level fields of object codecs are refused
 * (type `extra_forbidden`), so a misspelt optional field is never silently ignored.
 */
export const decode = <C extends t.Mixed>(codec: C, value: unknown, where: Location): t.TypeOf<C> => {
  const problems: Problem[] = [];
  const props = propsOf(codec);
  if (props !== null && typeof value === 'object' && value !== null && !Array.isArray(value)) {
    for (const key of Object.keys(value)) {
      if (!props.has(key)) problems.push({ type: 'extra_forbidden', loc: [where, key], msg: 'Extra inputs are not permitted' });
    }
  }
  if (where === 'body' && (typeof value !== 'object' || value === null || Array.isArray(value)) && props !== null) {
    throw invalid([{ type: 'type_error', loc: ['body'], msg: 'Input should be a JSON object' }]);
  }
  const result = codec.decode(value);
  if (result._tag === 'Left') problems.push(...result.left.map((e) => problemOf(where, e)));
  if (problems.length > 0) throw invalid(listed(where, dedupe(problems)));
  return (result as { right: t.TypeOf<C> }).right;
};

const integerCodec = (min: number, max: number, name: string, read: (u: unknown) => unknown) =>
  describedAs(new t.Type<number, number, unknown>(
    name,
    (u): u is number => typeof u === 'number' && Number.isSafeInteger(u) && u >= min && u <= max,
    (u, c) => {
      const n = read(u);
      return typeof n === 'number' && Number.isSafeInteger(n) && n >= min && n <= max
        ? t.success(n)
        : t.failure(u, c, `Input should be an integer from ${min} to ${max}`);
    },
    (n) => n,
  ), { type: 'integer', minimum: min, maximum: max });

/** An integer within bounds in a query string (its digits) or a JSON number. */
export const boundedInt = (min: number, max: number, name = `integer ${min}..${max}`) =>
  integerCodec(min, max, name, (u) => (typeof u === 'string' && /^-?\d+$/.test(u.trim()) ? Number(u) : u));

/** An integer within bounds in a JSON body: a JSON number only, as strict as every other body field. */
export const jsonInt = (min: number, max: number, name = `integer ${min}..${max}`) => integerCodec(min, max, name, (u) => u);

/** A string with a maximum length (blankness is the domain's call). */
export const text = (maxLength: number, name = `string (max ${maxLength})`) =>
  describedAs(new t.Type<string, string, unknown>(
    name,
    (u): u is string => typeof u === 'string' && u.length <= maxLength,
    (u, c) =>
      typeof u === 'string' && u.length <= maxLength
        ? t.success(u)
        : t.failure(u, c, typeof u === 'string' ? `String should have at most ${maxLength} characters` : 'Input should be a valid string'),
    (s) => s,
  ), { type: 'string', maxLength });

/** A query parameter that may be repeated or comma separated, as a list of non-empty names. */
export const nameList = describedAs(new t.Type<string[], string[], unknown>(
  'list of names',
  (u): u is string[] => Array.isArray(u) && u.every((s) => typeof s === 'string'),
  (u, c) => {
    const parts = (Array.isArray(u) ? u : [u]).flatMap((v) => (typeof v === 'string' ? v.split(',') : [null]));
    if (parts.some((p) => p === null)) return t.failure(u, c, 'Input should be a list of names');
    const names = (parts as string[]).map((p) => p.trim());
    // An empty name (`types=`, `a,,b`) is a mistake, not "no filter".
    if (names.includes('')) return t.failure(u, c, 'Input should be a list of names, none of them empty');
    return t.success([...new Set(names)]);
  },
  (l) => l,
), { type: 'array', items: { type: 'string' }, description: 'Repeated, or comma separated' });
