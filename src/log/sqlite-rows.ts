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

/** Positions a typed page of many types scans in order before it turns to the type index (see `typedPage`). */
const SCAN_WINDOW = 2048;
/** From this many types on, a typed page scans nearby positions first. */
const SCAN_FROM_TYPES = 4;

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
  // A page of some types, two ways. (1) Each type's next positions from the (type, position) index
  // alone, merged, then those rows: the cost of the page (times the types asked for, in index
  // entries), where a scan in position order would read every event in between: the whole log for a
  // type that is rare. (2) For many types (a fan-out asks for 24), first the next SCAN_WINDOW positions
  // in position order, by rowid: a live tail's page in one query, where one query per type costs ~4x
  // as much; past the window, (1).
  const nearby = new Map<number, Database.Statement>();
  const nearbyOf = (count: number): Database.Statement => {
    let statement = nearby.get(count);
    if (statement === undefined) {
      const types = Array.from({ length: count }, () => '?').join(', ');
      statement = db.prepare(`SELECT ${COLUMNS} FROM events NOT INDEXED WHERE position > ? AND position <= ? AND type IN (${types}) ORDER BY position LIMIT ?`).raw();
      nearby.set(count, statement);
    }
    return statement;
  };
  const lastPosition = db.prepare('SELECT max(position) FROM events').pluck();
  const positionsOfType = db.prepare('SELECT position FROM events INDEXED BY events_type WHERE type = ? AND position > ? ORDER BY position LIMIT ?').pluck();
  const rowsAt = db.prepare(`SELECT ${COLUMNS} FROM events WHERE position IN (SELECT value FROM json_each(?)) ORDER BY position`).raw();
  const ofTypes = (types: readonly string[], after: number, limit: number): Row[] => {
    const positions = types.flatMap((type) => positionsOfType.all(type, after, limit) as number[]);
    return positions.length === 0 ? [] : (rowsAt.all(JSON.stringify(positions.sort((a, b) => a - b).slice(0, limit))) as Row[]);
  };
  // One read transaction, so one snapshot: queried apart, a later query could see a commit (another
  // process's) that an earlier one missed, and the page would skip that commit's events of the
  // earlier query while returning later positions.
  const typedPage = db.transaction((asked: readonly string[], after: number, limit: number): Row[] => {
    const types = [...new Set(asked)];
    if (types.length < SCAN_FROM_TYPES) return ofTypes(types, after, limit);
    const near = nearbyOf(types.length).all(after, after + SCAN_WINDOW, ...types, limit) as Row[];
    if (near.length === limit || after + SCAN_WINDOW >= ((lastPosition.get() as number | null) ?? 0)) return near;
    return near.concat(ofTypes(types, after + SCAN_WINDOW, limit - near.length));
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
