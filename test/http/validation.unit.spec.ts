import { expect } from 'chai';
import * as t from 'io-ts';
import { ApiFailure } from '../../src/http/api-error.js';
import { boundedInt, decode, nameList, text } from '../../src/http/validation.js';

const problemsOf = (fn: () => unknown) => {
  try {
    fn();
  } catch (error) {
    expect(error).to.be.instanceOf(ApiFailure);
    const failure = (error as ApiFailure).error;
    if (failure.kind !== 'validation') throw new Error('not a validation failure');
    return failure.problems;
  }
  throw new Error('no failure');
};

describe('edge validation', () => {
  const Body = t.intersection([t.type({ subject: text(10), priority: t.keyof({ normal: null, high: null }) }), t.partial({ tags: t.array(t.string) })]);

  it('reports a missing field with its location', () => {
    expect(problemsOf(() => decode(Body, { priority: 'high' }, 'body'))).to.deep.equal([{ type: 'missing', loc: ['body', 'subject'], msg: 'Field required' }]);
  });

  it('reports an unknown enum value and a nested array item', () => {
    const problems = problemsOf(() => decode(Body, { subject: 's', priority: 'urgent', tags: ['a', 3] }, 'body'));
    expect(problems.map((p) => p.loc)).to.deep.equal([['body', 'priority'], ['body', 'tags', 1]]);
    expect(problems[0]?.type).to.equal('enum');
  });

  it('refuses unknown top-level fields', () => {
    expect(problemsOf(() => decode(Body, { subject: 's', priority: 'high', colour: 'red' }, 'body'))).to.deep.equal([
      { type: 'extra_forbidden', loc: ['body', 'colour'], msg: 'Extra inputs are not permitted' },
    ]);
  });

  it('refuses a body that is not an object', () => {
    expect(problemsOf(() => decode(Body, [1, 2], 'body'))[0]?.loc).to.deep.equal(['body']);
  });

  it('reads bounded integers from query strings', () => {
    const Query = t.type({ page_size: boundedInt(1, 100) });
    expect(decode(Query, { page_size: '20' }, 'query')).to.deep.equal({ page_size: 20 });
    for (const bad of ['0', '101', '-1', '1e3', 'ten', '99999999999999999999', '']) {
      expect(problemsOf(() => decode(Query, { page_size: bad }, 'query'))[0]?.loc).to.deep.equal(['query', 'page_size']);
    }
  });

  it('splits repeated and comma-separated names, dropping duplicates', () => {
    const Query = t.type({ types: nameList });
    expect(decode(Query, { types: ['a,b', 'a', ' c '] }, 'query')).to.deep.equal({ types: ['a', 'b', 'c'] });
  });

  it('refuses an empty name in a list, alone or between commas', () => {
    const Query = t.type({ types: nameList });
    for (const types of ['', 'a,,b', ['a', ' ']]) expect(problemsOf(() => decode(Query, { types }, 'query'))[0]?.msg).to.match(/none of them empty/);
  });

  it('limits text length', () => {
    expect(problemsOf(() => decode(Body, { subject: 'x'.repeat(11), priority: 'high' }, 'body'))[0]?.msg).to.match(/at most 10/);
  });
});
