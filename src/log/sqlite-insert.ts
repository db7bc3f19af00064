// Inserts one call's events, one single-row statement each, atomically within the shared group
// transaction. One multi-row INSERT per call would be atomic by itself, but cost SQLite 14% more
// CPU a row than single-row statements (the log's schema and rows, 1 to 3 a call, the two ways
// alternating in one process). A savepoint per call would copy every page it touched into a
// sub-journal. So a row that fails (an id already in the log) takes the rows its call inserted
// before it out again, and gives their positions back: a call that throws leaves nothing behind,
// not even a gap.
import type Database from 'better-sqlite3';

/** id, stream, revision, workspace_id, type, data, metadata, feed_offset */
export type InsertRow = [string, string, number, string, string, string, string | null, number | null];

/** Returns the function that inserts rows atomically and returns the last one's position. */
export const rowInserter = (db: Database.Database): ((rows: readonly InsertRow[]) => number) => {
  const insert = db.prepare('INSERT INTO events (id, stream, revision, workspace_id, type, data, metadata, feed_offset) VALUES (?, ?, ?, ?, ?, ?, ?, ?)');
  const remove = db.prepare('DELETE FROM events WHERE position >= ?');
  // AUTOINCREMENT's counter: restored, the next call takes the positions the failed one gave back.
  const restoreSequence = db.prepare("UPDATE sqlite_sequence SET seq = ? WHERE name = 'events'");

  /** Takes out the rows from `first` on, all this call's (the last rows of the open transaction). */
  const undo = (first: number): void => {
    try {
      remove.run(first);
      restoreSequence.run(first - 1);
    } catch (error) {
      // The call's rows would otherwise commit with the others: the whole batch fails instead.
      if (db.inTransaction) db.exec('ROLLBACK');
      throw error;
    }
  };

  return (rows) => {
    let first = 0;
    let last = 0;
    try {
      for (const row of rows) {
        last = Number(insert.run(row).lastInsertRowid);
        if (first === 0) first = last;
      }
    } catch (error) {
      if (first !== 0 && db.inTransaction) undo(first);
      throw error;
    }
    return last;
  };
};
