// Inserts one append's events with ONE statement. A statement that fails leaves no row behind, so a
// call needs no savepoint of its own in the shared group transaction, and a call of n events costs
// one statement, not n. Calls too big for one statement run their chunks in a savepoint.
import type Database from 'better-sqlite3';

/** id, stream, revision, workspace_id, type, data, metadata, feed_offset */
export type InsertRow = [string, string, number, string, string, string, string | null, number | null];

/** Rows per statement: 8 parameters each stays far below SQLite's limit of bound parameters. */
const MAX_ROWS = 64;

/** Returns the function that inserts rows atomically and returns the last one's position. */
export const rowInserter = (db: Database.Database): ((rows: readonly InsertRow[]) => number) => {
  const statements = new Map<number, Database.Statement>();
  const statementFor = (count: number): Database.Statement => {
    let statement = statements.get(count);
    if (!statement) {
      const values = Array.from({ length: count }, () => '(?, ?, ?, ?, ?, ?, ?, ?)').join(', ');
      statement = db.prepare(`INSERT INTO events (id, stream, revision, workspace_id, type, data, metadata, feed_offset) VALUES ${values}`);
      statements.set(count, statement);
    }
    return statement;
  };
  // AUTOINCREMENT gives the rows of one transaction consecutive positions: the last one names them all.
  const insertChunk = (rows: readonly InsertRow[]): number => Number(statementFor(rows.length).run(rows.flat()).lastInsertRowid);
  const inSavepoint = db.transaction((rows: readonly InsertRow[]): number => {
    let last = 0;
    for (let start = 0; start < rows.length; start += MAX_ROWS) last = insertChunk(rows.slice(start, start + MAX_ROWS));
    return last;
  });
  return (rows) => (rows.length <= MAX_ROWS ? insertChunk(rows) : inSavepoint(rows));
};
