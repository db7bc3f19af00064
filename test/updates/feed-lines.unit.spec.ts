import { expect } from 'chai';
import type { RecordedEvent } from '../../src/log/event-log.js';
import { feedItem, feedLines } from '../../src/updates/feed-item.js';

const record = (id: string, ticketId: string, offset: number): RecordedEvent => ({
  id,
  type: 'message.created',
  workspaceId: 'w"é\\😀',
  stream: `ticket-${ticketId}`,
  revision: 0,
  position: 1,
  offset,
  metadata: {},
  data: { ticket_id: ticketId, content: 'é😀\u2028"' },
});

/** The records as the export reads them from the log: the data as its JSON text, the offset as its digits. */
const stored = (records: readonly RecordedEvent[]) =>
  records.map((r) => ({ id: r.id, type: r.type, workspaceId: r.workspaceId, data: JSON.stringify(r.data), offset: String(r.offset) }));

describe('feedLines (unit)', () => {
  it('writes each line as JSON.stringify(feedItem(record)) and a newline, in UTF-8', () => {
    const records = [record('a'.repeat(32), 't-1', 1_763_765_235_000_001), record('b'.repeat(32), 't 2/é', 1_763_765_236_999_999)];
    const page = feedLines()(stored(records));
    expect(page.toString('utf8')).to.equal(records.map((r) => `${JSON.stringify(feedItem(r))}\n`).join(''));
  });

  it('grows its buffer for lines whose text around the data is longer than most', () => {
    const long = 'é'.repeat(5_000);
    const records = [record('c'.repeat(32), long, 1_763_765_235_000_001), record('d'.repeat(32), `${long}x`, 1_763_765_235_000_002)];
    const page = feedLines()(stored(records));
    expect(page.toString('utf8')).to.equal(records.map((r) => `${JSON.stringify(feedItem(r))}\n`).join(''));
  });

  it('grows its buffer for data of more bytes than characters, as the last lines of a page reach its end', () => {
    const records = Array.from({ length: 5 }, (_, i) => ({ ...record(String(i).repeat(32), 't-1', 1_763_765_235_000_001 + i), data: { ticket_id: 't-1', content: '中😀'.repeat(400 * (i + 1)) } }));
    const page = feedLines()(stored(records));
    expect(page.toString('utf8')).to.equal(records.map((r) => `${JSON.stringify(feedItem(r))}\n`).join(''));
  });

  it('gives each line its own links, type and workspace when the next line shares some of them', () => {
    const base = record('e'.repeat(32), 'same', 1_763_765_235_000_001);
    const records: RecordedEvent[] = [
      base,
      { ...base, id: 'f'.repeat(32), type: 'contact.identified', data: { id: 'same' } },
      { ...base, id: '0'.repeat(32), workspaceId: 'other', data: { ticket_id: 'same' } },
      { ...base, id: '1'.repeat(32), data: { ticket_id: 'next' } },
    ];
    const page = feedLines()(stored(records));
    expect(page.toString('utf8')).to.equal(records.map((r) => `${JSON.stringify(feedItem(r))}\n`).join(''));
  });

  it('stamps each line by its own offset: within a second, across one, and below the first (fewer digits than the fraction)', () => {
    const offsets = [999_999, 5, 1_000_000, 1_000_001, 1_763_765_235_999_999, 1_763_765_236_000_000, 1_763_765_236_000_007, 42];
    const records = offsets.map((offset, i) => record(String(i % 10).repeat(32), 't-1', offset));
    const page = feedLines()(stored(records));
    expect(page.toString('utf8')).to.equal(records.map((r) => `${JSON.stringify(feedItem(r))}\n`).join(''));
    expect(page.toString('utf8').split('\n', 2)[1]).to.contain('"timestamp":"1970-01-01T00:00:00.000005+00:00"');
  });
});
