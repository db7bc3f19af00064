// The MediaStore port: where uploaded file bytes live (the log keeps only their metadata). Content is
// streamed in and out, never held whole in memory.
import type { Readable } from 'node:stream';

export interface StoredObject {
  readonly stream: Readable;
  readonly size: number;
}

export interface MediaStore {
  /**
   * Streams `content` into the object `key` and resolves with the number of bytes written. The object
   * appears only once complete; on any failure (of the content stream or of storage) nothing is left
   * behind, `content` is destroyed, and the promise rejects.
   */
  put(key: string, content: Readable): Promise<number>;
  /** The object's bytes, or null when there is no such object. */
  open(key: string): Promise<StoredObject | null>;
  /**
   * Removes what writes interrupted by a crash left behind (never a write still running), and
   * resolves with how many partial objects went.
   */
  removeAbandoned(): Promise<number>;
}
