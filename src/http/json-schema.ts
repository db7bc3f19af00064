// io-ts codecs as JSON Schema (draft 2020-12, the dialect of OpenAPI 3.1), so the API document is
// generated from the codecs that validate requests and describe events. It reads the combinators the
// codebase uses; a custom `new t.Type` has no structure to read and must declare its schema with
// describedAs. Anything else throws, naming the codec, so a new combinator cannot slip into the
// document as an empty schema.
import * as t from 'io-ts';

export type JsonSchema = { readonly [key: string]: unknown };

const declared = new WeakMap<t.Any, JsonSchema>();

/** Declares the schema of a custom codec (what its validate accepts, as far as JSON Schema can say). */
export const describedAs = <C extends t.Any>(codec: C, schema: JsonSchema): C => {
  declared.set(codec, schema);
  return codec;
};

const objectOf = (props: t.Props, required: boolean): JsonSchema => {
  const names = Object.keys(props);
  return {
    type: 'object',
    properties: Object.fromEntries(names.map((name) => [name, toJsonSchema(props[name] as t.Any)])),
    ...(required && names.length > 0 ? { required: names } : {}),
  };
};

const isPlainObject = (schema: JsonSchema): boolean =>
  schema['type'] === 'object' && Object.keys(schema).every((k) => k === 'type' || k === 'properties' || k === 'required');

/** An intersection of object codecs is one object (so additionalProperties can close it); anything else, allOf. */
const intersectionOf = (members: readonly JsonSchema[]): JsonSchema => {
  if (!members.every(isPlainObject)) return { allOf: members };
  const required = members.flatMap((m) => (m['required'] as string[] | undefined) ?? []);
  return {
    type: 'object',
    properties: Object.assign({}, ...members.map((m) => m['properties'])),
    ...(required.length > 0 ? { required } : {}),
  };
};

/** Refinements whose predicate JSON Schema can say; other refinements keep their base type's schema. */
const REFINEMENTS: Readonly<Record<string, JsonSchema>> = { Int: { type: 'integer' } };

export const toJsonSchema = (codec: t.Any): JsonSchema => {
  const own = declared.get(codec);
  if (own !== undefined) return own;
  if (codec instanceof t.StringType) return { type: 'string' };
  if (codec instanceof t.NumberType) return { type: 'number' };
  if (codec instanceof t.BooleanType) return { type: 'boolean' };
  if (codec instanceof t.NullType) return { type: 'null' };
  if (codec instanceof t.UnknownType) return {};
  if (codec instanceof t.AnyDictionaryType) return { type: 'object' };
  if (codec instanceof t.LiteralType) return { const: codec.value };
  if (codec instanceof t.KeyofType) return { type: 'string', enum: Object.keys(codec.keys) };
  if (codec instanceof t.InterfaceType) return objectOf(codec.props, true);
  if (codec instanceof t.PartialType) return objectOf(codec.props, false);
  if (codec instanceof t.ExactType || codec instanceof t.ReadonlyType) return toJsonSchema(codec.type);
  if (codec instanceof t.ArrayType || codec instanceof t.ReadonlyArrayType) return { type: 'array', items: toJsonSchema(codec.type) };
  if (codec instanceof t.DictionaryType) return { type: 'object', propertyNames: toJsonSchema(codec.domain), additionalProperties: toJsonSchema(codec.codomain) };
  if (codec instanceof t.UnionType) return { anyOf: (codec.types as t.Any[]).map(toJsonSchema) };
  if (codec instanceof t.IntersectionType) return intersectionOf((codec.types as t.Any[]).map(toJsonSchema));
  // t.brand and t.refinement: the base type's schema, narrowed when the refinement is a known one.
  if (codec instanceof t.RefinementType) return { ...toJsonSchema(codec.type), ...REFINEMENTS[codec.name] };
  throw new Error(`toJsonSchema: no JSON Schema for codec "${codec.name}" (${codec.constructor.name}); declare one with describedAs`);
};

/** The schema of a request body: its top-level properties closed, as decode refuses unknown ones. */
export const closedObject = (schema: JsonSchema): JsonSchema => (schema['type'] === 'object' ? { ...schema, additionalProperties: false } : schema);
