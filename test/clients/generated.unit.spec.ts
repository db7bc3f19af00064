// The client helpers' generated files (typed events in three languages, shared signature vectors)
// are committed: regenerating them from the code the server serves its event schemas from must
// give the same bytes.
import { expect } from 'chai';
import { eventTypes } from '../../src/openapi/document.js';
import { renderAll, type EventTypeSchema } from '../../scripts/clients/event-types.js';
import { VECTORS_PATH, generatedFiles, staleFiles } from '../../scripts/clients/generate.js';

const served = (): EventTypeSchema[] => eventTypes().items;

describe('client helpers: generated files (unit)', function () {
  this.timeout(30_000); // gofmt formats the Go file

  it('the committed typed events and test vectors are what generation gives now', () => {
    const files = generatedFiles(served());
    expect(Object.keys(files)).to.have.members(['clients/typescript/src/events.ts', 'clients/python/support_platform/events.py', 'clients/go/events.go', VECTORS_PATH]);
    expect(staleFiles(files), 'run npm run clients:generate').to.deep.equal([]);
  });

  it('a field added to an event schema makes every language file stale, and names the field in each', () => {
    const items = served().map((item) =>
      item.name !== 'ticket.created'
        ? item
        : { ...item, schema: { ...item.schema, properties: { ...(item.schema['properties'] as object), channel_hint: { type: 'string' } } } },
    );
    const files = generatedFiles(items);
    expect(staleFiles(files)).to.have.members(['clients/typescript/src/events.ts', 'clients/python/support_platform/events.py', 'clients/go/events.go']);
    expect(files['clients/typescript/src/events.ts']).to.include('readonly channel_hint?: string;');
    expect(files['clients/python/support_platform/events.py']).to.include('channel_hint: Optional[str] = None');
    expect(files['clients/go/events.go']).to.match(/ChannelHint\s+\*string\s+`json:"channel_hint,omitempty"`/);
  });

  it('a schema the generators cannot type stops them, naming where it is', () => {
    const items = [{ name: 'ticket.created', schema: { type: 'object', properties: { when: { type: 'string', format: 'date-time', oneOf: [] } }, required: [] } }];
    expect(() => renderAll([{ name: 'x.y', schema: { type: 'object', properties: { n: { not: {} } } } }])).to.throw(/XYDataN/);
    // Keywords beyond the type are ignored, not guessed at: the field is a plain string.
    expect(renderAll(items)['clients/typescript/src/events.ts']).to.include('readonly when?: string;');
  });

  it('nullable, optional, nested and array fields map to each language', () => {
    const files = renderAll(served());
    expect(files['clients/typescript/src/events.ts']).to.include('readonly media: readonly MessageCreatedDataMediaItem[];').and.include('readonly comment?: string | null;');
    expect(files['clients/python/support_platform/events.py'])
      .to.include('media=[MessageCreatedDataMediaItem.from_dict(x0) for x0 in d["media"]]')
      .and.include('comment: Optional[str] = None');
    expect(files['clients/go/events.go']).to.match(/Media\s+\[\]MessageCreatedDataMediaItem\s+`json:"media"`/).and.match(/Comment\s+\*string\s+`json:"comment,omitempty"`/);
  });
});
