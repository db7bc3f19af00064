// Receives the multipart field `file` of an upload and streams it straight into the MediaStore
// (formidable via koa-body, with a write-stream handler instead of temp files). A byte counter in
// the stream stops the upload as soon as it passes the limit; the store then removes the partial
// object. Outcomes are the contract's: 413 MEDIA_TOO_LARGE, 502 MEDIA_UPLOAD_FAILED, or a 422.
import { Transform } from 'node:stream';
import { koaBody } from 'koa-body';
import { domainError } from '../domain/errors.js';
import { business, invalid } from '../http/api-error.js';
import type { ApiContext } from '../http/context.js';
import type { MediaStore } from './media-store.js';

export interface ReceivedFile {
  readonly fileName: string;
  readonly contentType: string;
  readonly size: number;
}

const FIELD = 'file';
const MAX_FILE_NAME = 255;
const MIME = /^[a-z0-9!#$&^_.+-]+\/[a-z0-9!#$&^_.+-]+$/i;

class TooLarge extends Error {
  constructor(readonly limit: number) {
    super(`file exceeds ${limit} bytes`);
    this.name = 'TooLarge';
  }
}

const byteLimit = (max: number): Transform => {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      seen += chunk.length;
      done(seen > max ? new TooLarge(max) : null, chunk);
    },
  });
};

const isFormidableError = (e: unknown): e is Error => e instanceof Error && typeof (e as { httpCode?: unknown }).httpCode === 'number';

const multipartProblem = (msg: string) => invalid([{ type: 'multipart', loc: ['body', FIELD], msg }]);

/** Streams the request's `file` part into `store` under `key`; throws an ApiFailure on any failure. */
export const receiveUpload = async (ctx: ApiContext, store: MediaStore, key: string, maxBytes: number): Promise<ReceivedFile> => {
  // Set by formidable's callback; the cast keeps TypeScript from narrowing it to null.
  let started = null as { fileName: string; contentType: string; stored: Promise<number> } | null;
  const parse = koaBody({
    multipart: true,
    json: false,
    urlencoded: false,
    text: false,
    patchKoa: false,
    patchNode: false,
    formidable: {
      maxFiles: 1,
      // The byte counter enforces the limit while streaming; formidable's own checks are off.
      maxFileSize: Number.MAX_SAFE_INTEGER,
      maxTotalFileSize: Number.MAX_SAFE_INTEGER,
      allowEmptyFiles: true,
      minFileSize: 0,
      filter: (part) => part.name === FIELD,
      fileWriteStreamHandler: (file) => {
        const limit = byteLimit(maxBytes);
        const stored = store.put(key, limit);
        stored.catch(() => undefined); // settled below; never an unhandled rejection
        // formidable passes its file object, whose declared type omits the part's name and type.
        const part = file as { originalFilename?: string | null; mimetype?: string | null } | undefined;
        const name = part?.originalFilename?.trim() || 'file';
        const type = part?.mimetype ?? '';
        started = { fileName: name.slice(0, MAX_FILE_NAME), contentType: MIME.test(type) ? type.toLowerCase() : 'application/octet-stream', stored };
        return limit;
      },
    },
  });

  let parseError: unknown = null;
  await parse(ctx as never, async () => undefined).catch((error: unknown) => {
    parseError = error;
  });
  // After a failure formidable stops reading: drain the rest so the client gets the answer.
  if (parseError !== null) ctx.req.resume();
  const upload = started;
  const outcome = upload === null ? null : await upload.stored.then((size) => ({ size }), (error: unknown) => ({ error }));

  if (parseError instanceof TooLarge || (outcome !== null && 'error' in outcome && outcome.error instanceof TooLarge)) {
    throw business(domainError('MEDIA_TOO_LARGE', `File is larger than the limit of ${maxBytes} bytes`, { max_bytes: maxBytes }));
  }
  if (isFormidableError(parseError)) throw multipartProblem(`Malformed multipart body: ${parseError.message}`);
  if (upload === null || outcome === null) {
    if (parseError !== null) throw parseError;
    throw invalid([{ type: 'missing', loc: ['body', FIELD], msg: 'Field required: a multipart file part named "file"' }]);
  }
  if ('error' in outcome || parseError !== null) {
    console.error('media upload failed:', 'error' in outcome ? outcome.error : parseError);
    throw business(domainError('MEDIA_UPLOAD_FAILED', 'Writing the file to storage failed; retry later'));
  }
  return { fileName: upload.fileName, contentType: upload.contentType, size: outcome.size };
};
