// Receives the multipart part `file` of an upload and streams it straight into the MediaStore
// (formidable via koa-body, taking the parts ourselves with `onPart`, so no temp file and no part is
// held in memory). Outcomes are the contract's: 413 MEDIA_TOO_LARGE, 502 MEDIA_UPLOAD_FAILED, or a
// 422 naming what is wrong with the form.
//
// Every outcome settles the one stream feeding the store before the answer, and a failed or aborted
// upload destroys it, so the store removes the partial object: no open descriptor and no partial file
// outlive the request, whatever the client sends or however it disconnects.
import type { IncomingMessage } from 'node:http';
import { Transform } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { koaBody } from 'koa-body';
import { domainError } from '../domain/errors.js';
import { ApiFailure, business, invalid } from '../http/api-error.js';
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
/** Bytes of parts other than `file` read (and discarded) before the form counts as abuse. */
const OTHER_PARTS_MAX_BYTES = 64 * 1024;
/** Room for boundaries, part headers and those other parts beside the file. */
const MULTIPART_OVERHEAD_BYTES = OTHER_PARTS_MAX_BYTES + 16 * 1024;
/**
 * After refusing an upload mid-body, the rest of it is read and discarded for at most this long
 * before the connection closes: the client is still sending, and closing at once could reset the
 * connection before it reads the answer.
 */
const LINGER_MS = 1_000;

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

interface Upload {
  readonly fileName: string;
  readonly contentType: string;
  /** The byte counter the part's data is written into; the store reads from it. */
  readonly input: Transform;
  readonly stored: Promise<number>;
}

/** The part as formidable hands it over: an old-style stream of `data` and `end` events. */
interface Part extends NodeJS.EventEmitter {
  readonly name: string | null;
  readonly originalFilename: string | null;
  readonly mimetype: string | null;
}

const isFormidableError = (e: unknown): e is Error => e instanceof Error && typeof (e as { httpCode?: unknown }).httpCode === 'number';

const formProblem = (msg: string) => invalid([{ type: 'multipart', loc: ['body', FIELD], msg }]);
const tooLarge = (maxBytes: number) => business(domainError('MEDIA_TOO_LARGE', `File is larger than the limit of ${maxBytes} bytes`, { max_bytes: maxBytes }));

/**
 * After a refusal, reads and discards what is left of the request for a short while, so a client
 * still sending sees the answer; what is still unread then closes the connection (src/http/app.ts).
 */
const settleRequest = async (req: IncomingMessage) => {
  if (req.complete || req.destroyed) return;
  const ended = new Promise<void>((resolve) => {
    req.once('end', resolve);
    req.once('close', resolve);
  });
  req.resume();
  await Promise.race([ended, sleep(LINGER_MS)]);
};

/** 413 before reading a byte when the declared length cannot hold a file within the limit. */
const refuseDeclaredOversize = (ctx: ApiContext, maxBytes: number): void => {
  const declared = ctx.request.length;
  if (declared !== undefined && declared > maxBytes + MULTIPART_OVERHEAD_BYTES) throw tooLarge(maxBytes);
};

/** Streams the request's `file` part into `store` under `key`; throws an ApiFailure on any failure. */
export const receiveUpload = async (ctx: ApiContext, store: MediaStore, key: string, maxBytes: number): Promise<ReceivedFile> => {
  refuseDeclaredOversize(ctx, maxBytes);
  let file: Upload | null = null;
  let refusal: unknown = null;
  let otherBytes = 0;
  let wake: () => void = () => undefined;
  const refused = new Promise<void>((resolve) => {
    wake = resolve;
  });
  /** The first refusal wins: the upload's input is destroyed (the store removes its partial object). */
  const refuse = (reason: unknown) => {
    if (refusal !== null) return;
    refusal = reason;
    file?.input.destroy(reason instanceof Error ? reason : new Error(String(reason)));
    wake();
  };

  const takeFile = (part: Part) => {
    if (file !== null) return refuse(formProblem('More than one part named "file": send exactly one file'));
    if (part.originalFilename === null) {
      return refuse(formProblem('The part "file" is a form field, not a file: give it a filename in its Content-Disposition'));
    }
    const input = byteLimit(maxBytes);
    const stored = store.put(key, input);
    // A part without its own Content-Type is a file of unknown type (RFC 7578 allows it).
    const type = part.mimetype ?? '';
    file = {
      fileName: (part.originalFilename.trim() || 'file').slice(0, MAX_FILE_NAME),
      contentType: MIME.test(type) ? type.toLowerCase() : 'application/octet-stream',
      input,
      stored,
    };
    // The byte counter's own error (TooLarge) or the store's: whichever comes first is the refusal.
    input.on('error', refuse);
    stored.catch(refuse);
    part.on('data', (chunk: Buffer) => {
      if (refusal !== null || input.write(chunk)) return;
      // The store is slower than the client: hold the request until it catches up.
      ctx.req.pause();
      input.once('drain', () => ctx.req.resume());
    });
    part.on('end', () => {
      if (refusal === null) input.end();
    });
    return undefined;
  };

  const parse = koaBody({
    multipart: true,
    json: false,
    urlencoded: false,
    text: false,
    patchKoa: false,
    patchNode: false,
    formidable: {
      // Parts are taken here; formidable only splits the body, so its own limits never come into play.
      onPart: (part: unknown) => {
        const taken = part as Part;
        if (refusal !== null) return;
        if (taken.name === FIELD) return takeFile(taken);
        taken.on('data', (chunk: Buffer) => {
          otherBytes += chunk.length;
          if (otherBytes > OTHER_PARTS_MAX_BYTES) refuse(formProblem(`Parts other than "file" exceed ${OTHER_PARTS_MAX_BYTES} bytes`));
        });
        return undefined;
      },
    },
  });
  const parsed = parse(ctx as never, async () => undefined).then(
    () => undefined,
    (error: unknown) => refuse(error),
  );
  await Promise.race([parsed, refused]);

  // Assigned in callbacks, which TypeScript's narrowing cannot see.
  const upload = file as Upload | null;
  if (refusal === null && upload === null) refuse(invalid([{ type: 'missing', loc: ['body', FIELD], msg: 'Field required: a multipart file part named "file"' }]));
  const outcome = upload === null ? null : await upload.stored.then((size) => ({ size }), (error: unknown) => ({ error }));
  if (refusal === null && outcome !== null && 'size' in outcome && upload !== null) {
    return { fileName: upload.fileName, contentType: upload.contentType, size: outcome.size };
  }
  await settleRequest(ctx.req);
  throw failureOf(refusal, maxBytes);
};

const failureOf = (refusal: unknown, maxBytes: number): ApiFailure => {
  if (refusal instanceof ApiFailure) return refusal;
  if (refusal instanceof TooLarge) return tooLarge(maxBytes);
  if (isFormidableError(refusal)) return formProblem(`Malformed multipart body: ${refusal.message}`);
  console.error('media upload failed:', refusal);
  return business(domainError('MEDIA_UPLOAD_FAILED', 'Writing the file to storage failed; retry later'));
};
