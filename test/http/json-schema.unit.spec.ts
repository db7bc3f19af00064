import { expect } from 'chai';
import * as t from 'io-ts';
import { closedObject, definitionOf, describedAs, toJsonSchema } from '../../src/http/json-schema.js';
import { boundedInt, text } from '../../src/http/validation.js';

describe('io-ts → JSON Schema', () => {
  it('reads the combinators the codebase uses', () => {
    const Codec = t.intersection([
      t.type({ id: t.string, n: t.number, ok: t.boolean, kind: t.keyof({ a: null, b: null }), tag: t.literal('x') }),
      t.partial({ note: t.union([text(10), t.null]), list: t.array(boundedInt(1, 5)), map: t.record(t.string, t.string), int: t.Int, any: t.unknown }),
    ]);
    expect(toJsonSchema(Codec)).to.deep.equal({
      type: 'object',
      properties: {
        id: { type: 'string' },
        n: { type: 'number' },
        ok: { type: 'boolean' },
        kind: { type: 'string', enum: ['a', 'b'] },
        tag: { const: 'x' },
        note: { anyOf: [{ type: 'string', maxLength: 10 }, { type: 'null' }] },
        list: { type: 'array', items: { type: 'integer', minimum: 1, maximum: 5 } },
        map: { type: 'object', propertyNames: { type: 'string' }, additionalProperties: { type: 'string' } },
        int: { type: 'integer' },
        any: {},
      },
      required: ['id', 'n', 'ok', 'kind', 'tag'],
    });
  });

  it('keeps an intersection with a non-object member as allOf, and closes only objects', () => {
    const schema = toJsonSchema(t.intersection([t.type({ a: t.string }), t.array(t.string)]));
    expect(schema).to.have.key('allOf');
    expect(closedObject(schema)).to.equal(schema);
    expect(closedObject(toJsonSchema(t.type({ a: t.string })))).to.include({ additionalProperties: false });
  });

  it('takes the declared schema of a custom codec', () => {
    const custom = describedAs(new t.Type<string, string, unknown>('custom', t.string.is, t.string.validate, String), { type: 'string', format: 'uri' });
    expect(toJsonSchema(t.type({ u: custom }))).to.deep.equal({ type: 'object', properties: { u: { type: 'string', format: 'uri' } }, required: ['u'] });
  });

  it('writes the codecs it is given refs for as $ref, wherever they occur, and defines them on request', () => {
    const Inner = t.type({ a: t.string });
    const refs = new Map([[Inner, '#/components/schemas/Inner']]);
    expect(toJsonSchema(t.type({ one: Inner, many: t.array(Inner) }), refs)).to.deep.equal({
      type: 'object',
      properties: { one: { $ref: '#/components/schemas/Inner' }, many: { type: 'array', items: { $ref: '#/components/schemas/Inner' } } },
      required: ['one', 'many'],
    });
    expect(definitionOf(Inner, refs)).to.deep.equal(toJsonSchema(Inner));
    expect(toJsonSchema(Inner)).to.not.have.key('$ref');
  });

  it('writes a union tagged by a literal as oneOf, with a discriminator when its members are refs; any other union as anyOf', () => {
    const A = t.type({ type: t.literal('a'), n: t.number });
    const B = t.exact(t.type({ type: t.literal('b'), s: t.string }));
    expect(toJsonSchema(t.union([A, B]))).to.deep.equal({ oneOf: [toJsonSchema(A), toJsonSchema(B)] });
    const refs = new Map<t.Any, string>([
      [A, '#/A'],
      [B, '#/B'],
    ]);
    expect(toJsonSchema(t.union([A, B]), refs)).to.deep.equal({
      oneOf: [{ $ref: '#/A' }, { $ref: '#/B' }],
      discriminator: { propertyName: 'type', mapping: { a: '#/A', b: '#/B' } },
    });
    // Not tagged: the same literal twice, a member without it, a member that is no object.
    expect(toJsonSchema(t.union([A, t.type({ type: t.literal('a'), s: t.string })]))).to.have.key('anyOf');
    expect(toJsonSchema(t.union([A, t.type({ s: t.string })]))).to.have.key('anyOf');
    expect(toJsonSchema(t.union([A, t.null]))).to.have.key('anyOf');
  });

  it('fails loudly, naming it, on a codec it cannot read', () => {
    const opaque = new t.Type<string, string, unknown>('opaque thing', t.string.is, t.string.validate, String);
    expect(() => toJsonSchema(t.type({ x: t.array(opaque) }))).to.throw(/"opaque thing".*describedAs/);
    expect(() => toJsonSchema(t.tuple([t.string, t.number]))).to.throw(/TupleType/);
  });
});
