// Rows of the SQLite log and the reads that return them. Rows come back as arrays (better-sqlite3's
// raw mode): building a keyed object per row costs more than the array, and reads are hot.
import type Database from 'better-sqlite3';
import type { FeedQuery, JsonObject, ReadAllOptions, RecordedEvent } from './event-log.js';

/** position, id, stream, revision, workspace_id, type, data, metadata (NULL when empty), feed_offset */
export type Row = [number, string, string, number, string, string, string, string | null, number | null];

export const COLUMNS = 'position, id, stream, revision, workspace_id, type, data, metadata, feed_offset';

export const toRecord = (row: Row): RecordedEvent => ({
  id: row[1],
  type: row[5],
  workspaceId: row[4],
  stream: row[2],
  revision: row[3],
  position: row[0],
  offset: row[8],
  data: JSON.parse(row[6]) as JsonObject,
  metadata: row[7] === null ? {} : (JSON.parse(row[7]) as JsonObject),
});

/** What the metadata column stores: NULL for none, so reading most events parses one JSON text, not two. */
export const metadataText = (metadata: JsonObject | undefined): string | null =>
  metadata === undefined || Object.keys(metadata).length === 0 ? null : JSON.stringify(metadata);

const typesParam = (types: readonly string[] | undefined): string | undefined =>
  types === undefined ? undefined : JSON.stringify(types);

/** Statements for readAll and readFeed, one prepared per combination of optional filters used. */
export const filteredReads = (db: Database.Database) => {
  const cache = new Map<string, Database.Statement>();
  const prepare = (key: string, sql: () => string): Database.Statement => {
    let statement = cache.get(key);
    if (!statement) {
      statement = db.prepare(sql()).raw();
      cache.set(key, statement);
    }
    return statement;
  };
  const typeClause = (types: string | undefined) => (types === undefined ? '' : ' AND type IN (SELECT value FROM json_each(@types))');
  // A page of some types: each type's next positions from the (type, position) index alone, merged,
  // then those rows. Its cost is the page's (times the types asked for, in index entries), where a
  // scan in position order reads every event in between: the whole log for a type that is rare.
  const positionsOfType = db.prepare('SELECT position FROM events INDEXED BY events_type WHERE type = ? AND position > ? ORDER BY position LIMIT ?').pluck();
  const rowsAt = db.prepare(`SELECT ${COLUMNS} FROM events WHERE position IN (SELECT value FROM json_each(?)) ORDER BY position`).raw();
  // One read transaction, so one snapshot: queried apart, a later type's query could see a commit
  // (another process's) that an earlier one missed, and the page would skip that commit's events of
  // the earlier type while returning later positions.
  const typedPage = db.transaction((types: readonly string[], after: number, limit: number): Row[] => {
    const positions = [...new Set(types)].flatMap((type) => positionsOfType.all(type, after, limit) as number[]);
    if (positions.length === 0) return [];
    return rowsAt.all(JSON.stringify(positions.sort((a, b) => a - b).slice(0, limit))) as Row[];
  });
  return {
    all: (options: ReadAllOptions): Row[] => {
      const ws = options.workspaceId;
      if (options.types !== undefined && ws === undefined && options.limit !== undefined && options.limit > 0) return typedPage(options.types, options.after, options.limit);
      const types = typesParam(options.types);
      const statement = prepare(`all:${types !== undefined}:${ws !== undefined}`, () =>
        `SELECT ${COLUMNS} FROM events WHERE position > @after${ws === undefined ? '' : ' AND workspace_id = @ws'}` +
        `${typeClause(types)} ORDER BY position LIMIT @limit`,
      );
      return statement.all({ after: options.after, limit: options.limit ?? -1, ...(types === undefined ? {} : { types }), ...(ws === undefined ? {} : { ws }) }) as Row[];
    },
    feed: (query: FeedQuery): Row[] => {
      const types = typesParam(query.types);
      const statement = prepare(`feed:${types !== undefined}`, () =>
        `SELECT ${COLUMNS} FROM events WHERE workspace_id = @ws AND feed_offset >= @from${typeClause(types)}` +
        ' ORDER BY feed_offset LIMIT @limit',
      );
      return statement.all({ ws: query.workspaceId, from: query.fromOffset, limit: query.limit, ...(types === undefined ? {} : { types }) }) as Row[];
    },
  };
};
