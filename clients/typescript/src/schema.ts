// A JSON Schema check of the dialect the server's event schemas use (type, properties, required,
// enum, anyOf, items): enough to refuse an event whose data is not what its type promises, with no
// dependency.
export type JsonSchema = { readonly [key: string]: unknown };

const typeMatches = (type: unknown, value: unknown): boolean => {
  switch (type) {
    case 'string':
      return typeof value === 'string';
    case 'number':
      return typeof value === 'number';
    case 'integer':
      return Number.isInteger(value);
    case 'boolean':
      return typeof value === 'boolean';
    case 'null':
      return value === null;
    case 'array':
      return Array.isArray(value);
    case 'object':
      return typeof value === 'object' && value !== null && !Array.isArray(value);
    default:
      return true;
  }
};

/** Where `value` first fails `schema` (`$.data.media[0].url: …`), or null when it conforms. */
export const mismatch = (schema: JsonSchema, value: unknown, at = '$'): string | null => {
  const anyOf = schema['anyOf'] as JsonSchema[] | undefined;
  if (anyOf !== undefined && !anyOf.some((s) => mismatch(s, value, at) === null)) return `${at}: matches none of its ${anyOf.length} alternatives`;
  if (schema['type'] !== undefined && !typeMatches(schema['type'], value)) return `${at}: not of type ${String(schema['type'])}`;
  const allowed = schema['enum'] as unknown[] | undefined;
  if (allowed !== undefined && !allowed.includes(value)) return `${at}: not one of ${allowed.join(', ')}`;
  if (Array.isArray(value) && schema['items'] !== undefined) {
    for (const [i, item] of value.entries()) {
      const found = mismatch(schema['items'] as JsonSchema, item, `${at}[${i}]`);
      if (found !== null) return found;
    }
  }
  if (typeMatches('object', value)) {
    const record = value as Record<string, unknown>;
    for (const name of (schema['required'] as string[] | undefined) ?? []) if (!(name in record)) return `${at}.${name}: missing`;
    for (const [name, s] of Object.entries((schema['properties'] as Record<string, JsonSchema> | undefined) ?? {})) {
      if (!(name in record)) continue;
      const found = mismatch(s, record[name], `${at}.${name}`);
      if (found !== null) return found;
    }
  }
  return null;
};
