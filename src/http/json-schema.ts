// io-ts codecs as JSON Schema (draft 2020-12, the dialect of OpenAPI 3.1), so the API document is
// generated from the codecs that validate requests and describe events. It reads the combinators the
// codebase uses; a custom `new t.Type` has no structure to read and must declare its schema with
// describedAs. Anything else throws, naming the codec, so a new combinator cannot slip into the
// document as an empty schema. A codec the caller names in `refs` is written as a `$ref` to its
// schema (the document's components), so a schema used in several places is written once.
import * as t from 'io-ts';

export type JsonSchema = { readonly [key: string]: unknown };

const declared = new WeakMap<t.Any, JsonSchema>();

/** Declares the schema of a custom codec (what its validate accepts, as far as JSON Schema can say). */
export const describedAs = <C extends t.Any>(codec: C, schema: JsonSchema): C => {
  declared.set(codec, schema);
  return codec;
};

/** Codecs written as `{$ref}` to the address given, wherever they occur. */
export type SchemaRefs = ReadonlyMap<t.Any, string>;

const NO_REFS: SchemaRefs = new Map();

const objectOf = (props: t.Props, required: boolean, refs: SchemaRefs): JsonSchema => {
  const names = Object.keys(props);
  return {
    type: 'object',
    properties: Object.fromEntries(names.map((name) => [name, toJsonSchema(props[name] as t.Any, refs)])),
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

const interfaceOf = (codec: t.Any | undefined): t.InterfaceType<t.Props> | null =>
  codec instanceof t.ExactType || codec instanceof t.ReadonlyType ? interfaceOf(codec.type as t.Any) : codec instanceof t.InterfaceType ? codec : null;

/** The literal an object codec's required property `key` is, if it is one. */
const literalAt = (codec: t.Any, key: string): string | number | boolean | undefined => {
  const property = interfaceOf(codec)?.props[key];
  return property instanceof t.LiteralType ? (property.value as string | number | boolean) : undefined;
};

/** The property that is a literal of its own in every member, if there is one: the union is then a tagged one. */
const tagOf = (members: readonly t.Any[]): string | undefined =>
  Object.keys(interfaceOf(members[0])?.props ?? {}).find((key) => {
    const values = members.map((m) => literalAt(m, key));
    return values.every((v) => v !== undefined) && new Set(values).size === values.length;
  });

/**
 * A tagged union is `oneOf`, with the OpenAPI discriminator when its members are references (its
 * mapping names schemas); any other union, `anyOf`.
 */
const unionOf = (members: readonly t.Any[], refs: SchemaRefs): JsonSchema => {
  const schemas = members.map((m) => toJsonSchema(m, refs));
  const tag = tagOf(members);
  if (tag === undefined) return { anyOf: schemas };
  if (!members.every((m) => refs.has(m))) return { oneOf: schemas };
  return { oneOf: schemas, discriminator: { propertyName: tag, mapping: Object.fromEntries(members.map((m) => [String(literalAt(m, tag)), refs.get(m)])) } };
};

/** The codec's schema; the codecs in `refs` (this one too) as references. */
export const toJsonSchema = (codec: t.Any, refs: SchemaRefs = NO_REFS): JsonSchema => {
  const ref = refs.get(codec);
  return ref === undefined ? definitionOf(codec, refs) : { $ref: ref };
};

/** The codec's own schema, written out; the codecs in `refs` inside it as references. */
export const definitionOf = (codec: t.Any, refs: SchemaRefs = NO_REFS): JsonSchema => {
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
  if (codec instanceof t.InterfaceType) return objectOf(codec.props, true, refs);
  if (codec instanceof t.PartialType) return objectOf(codec.props, false, refs);
  if (codec instanceof t.ExactType || codec instanceof t.ReadonlyType) return toJsonSchema(codec.type, refs);
  if (codec instanceof t.ArrayType || codec instanceof t.ReadonlyArrayType) return { type: 'array', items: toJsonSchema(codec.type, refs) };
  if (codec instanceof t.DictionaryType) return { type: 'object', propertyNames: toJsonSchema(codec.domain, refs), additionalProperties: toJsonSchema(codec.codomain, refs) };
  if (codec instanceof t.UnionType) return unionOf(codec.types as t.Any[], refs);
  if (codec instanceof t.IntersectionType) return intersectionOf((codec.types as t.Any[]).map((m) => toJsonSchema(m, refs)));
  // t.brand and t.refinement: the base type's schema, narrowed when the refinement is a known one.
  if (codec instanceof t.RefinementType) return { ...toJsonSchema(codec.type, refs), ...REFINEMENTS[codec.name] };
  throw new Error(`toJsonSchema: no JSON Schema for codec "${codec.name}" (${codec.constructor.name}); declare one with describedAs`);
};

/** The schema of a request body: its top-level properties closed, as decode refuses unknown ones. */
export const closedObject = (schema: JsonSchema): JsonSchema => (schema['type'] === 'object' ? { ...schema, additionalProperties: false } : schema);
