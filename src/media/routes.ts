// Media routes: POST /api/v1/media/upload, GET /api/v1/media/{id} (API key), GET /api/media/{id}
// (a signed link, ./signed-links.ts: no key) and the internal switch for a workspace's own bucket
// (PUT /internal/v1/workspaces/{id}/media-bucket).
import * as t from 'io-ts';
import type { Core } from '../app/core.js';
import { loadState } from '../app/command-handler.js';
import {
  mediaAggregate,
  mediaBucketAggregate,
  mediaBucketStream,
  mediaObjectKey,
  mediaStream,
  type MediaFile,
} from '../domain/media/media.js';
import { business, invalid, notFound, short } from '../http/api-error.js';
import type { RouteModule } from '../http/app.js';
import type { ApiContext } from '../http/context.js';
import { decode } from '../http/validation.js';
import { always, answer, refusal, type Operation } from '../http/operations.js';
import { setHeaders, type ResponseHeader } from '../http/response-headers.js';
import type { MediaStore } from './media-store.js';
import type { MediaLinks } from './signed-links.js';
import { receiveUpload } from './upload.js';

const MEDIA_ID = /^[0-9a-f]{32}$/;

const BucketUrl = new t.Type<string, string, unknown>(
  'http(s) URL',
  (u): u is string => typeof u === 'string',
  (u, c) => {
    if (typeof u !== 'string' || !/^https?:\/\/[^\s]+$/i.test(u) || !URL.canParse(u)) return t.failure(u, c, 'Input should be an http or https URL');
    return t.success(u.replace(/\/+$/, ''));
  },
  (s) => s,
);
const BucketBody = t.type({ base_url: t.union([BucketUrl, t.null]) });

const Upload = t.type({ id: t.string, file_name: t.string, content_type: t.string, size: t.number, url: t.string });

/** What servingHeaders sets on every file it serves. */
const SERVING_HEADERS = ['Content-Disposition', 'X-Content-Type-Options', 'Content-Security-Policy', 'Cache-Control'] as const satisfies readonly ResponseHeader[];

const operations: readonly Operation[] = [
  {
    method: 'post',
    path: '/media/upload',
    summary: 'Upload one file (multipart/form-data, one part named "file" with a filename)',
    body: 'multipart-file',
    answers: [
      answer(201, 'The stored file', Upload),
      refusal(413, 'business', 'MEDIA_TOO_LARGE'),
      refusal(422, 'validation', 'Not multipart/form-data with a file part named "file"'),
      refusal(502, 'business', 'MEDIA_UPLOAD_FAILED'),
    ],
  },
  {
    method: 'get',
    path: '/media/:media_id',
    summary: 'Download a file, served inert',
    answers: [
      { status: 200, description: 'The file, with its content type', media: 'binary', headers: always(...SERVING_HEADERS) },
      answer(302, "Redirect to the workspace's own bucket, when one is set", undefined, always('Location')),
      refusal(404, 'short', 'File not found'),
    ],
  },
];

/**
 * Types a browser shows without running anything; every other upload (HTML, SVG, XML, scripts, PDF,
 * unknown types) is served as a download, so no file can act on the API's origin.
 */
const INERT = /^(image\/(png|jpeg|gif|webp|avif|bmp)|audio\/[\w.+-]+|video\/[\w.+-]+|text\/plain)$/;

/** Headers that keep an uploaded file inert wherever it is opened. */
export const servingHeaders = (fileName: string, contentType: string): Record<(typeof SERVING_HEADERS)[number], string> => ({
  'Content-Disposition': `${INERT.test(contentType) ? 'inline' : 'attachment'}; filename*=UTF-8''${encodeURIComponent(fileName)}`,
  // Served as declared, never sniffed into something else.
  'X-Content-Type-Options': 'nosniff',
  // Should a browser render it anyway: no script, no plugin, no request, an opaque origin.
  'Content-Security-Policy': "default-src 'none'; style-src 'unsafe-inline'; sandbox",
  // The file is behind an API key: no shared cache may keep it.
  'Cache-Control': 'private, no-cache',
});

export const mediaRoutes = (core: Core, store: MediaStore, links: MediaLinks): RouteModule => {
  /** The upload's workspace and metadata, or null when `mediaId` names no file. */
  const uploadOf = async (mediaId: string) => {
    const records = MEDIA_ID.test(mediaId) ? await core.log.readStream(mediaStream(mediaId)) : [];
    const file = records.reduce(mediaAggregate.evolve, mediaAggregate.initial);
    const workspaceId = records[0]?.workspaceId;
    return file === null || workspaceId === undefined ? null : { workspaceId, file };
  };

  const bucketOf = async (workspaceId: string) =>
    (await loadState(core.log, mediaBucketStream(workspaceId), mediaBucketAggregate.evolve, mediaBucketAggregate.initial)).state;

  /** The file's bytes, inert, or a 302 to the workspace's bucket while one is set. */
  const serve = async (ctx: ApiContext, workspaceId: string, file: MediaFile) => {
    const bucket = await bucketOf(workspaceId);
    if (bucket !== null) {
      ctx.redirect(`${bucket}/${file.media_id}`);
      // No "Redirecting to …" page: the answer is its Location, as the document says. (A null body
      // makes koa answer 204, so the status is set again after it.)
      ctx.body = null;
      ctx.status = 302;
      return;
    }
    const object = await store.open(mediaObjectKey(workspaceId, file.media_id));
    if (object === null) throw notFound('File');
    ctx.type = file.content_type;
    ctx.length = object.size;
    setHeaders(ctx, servingHeaders(file.file_name, file.content_type));
    ctx.body = object.stream;
  };

  return {
    operations,
    multipart: ['/api/v1/media/upload'],
    api(router) {
      router.post('/media/upload', async (ctx: ApiContext) => {
        if (!ctx.request.is('multipart/form-data')) {
          throw invalid([{ type: 'content_type', loc: ['header', 'content-type'], msg: 'Expected multipart/form-data with a file part named "file"' }]);
        }
        const workspaceId = ctx.state.workspace.id;
        const mediaId = core.resourceId('media', ctx.state.scope);
        const received = await receiveUpload(ctx, store, mediaObjectKey(workspaceId, mediaId), core.config.mediaMaxBytes);
        const result = await core.handle(mediaAggregate, mediaStream(mediaId), workspaceId, { mediaId, ...received }, ctx.state.scope);
        if (result._tag === 'Left') throw business(result.left);
        const file = result.right.state;
        if (file === null) throw new Error('media upload recorded no event');
        ctx.status = 201;
        const uploaded: t.TypeOf<typeof Upload> = { id: file.media_id, file_name: file.file_name, content_type: file.content_type, size: file.size, url: file.url };
        ctx.body = uploaded;
      });

      router.get('/media/:media_id', async (ctx: ApiContext) => {
        const workspaceId = ctx.state.workspace.id;
        const upload = await uploadOf(String(ctx.params['media_id']));
        // Another workspace's file does not exist for the caller.
        if (upload === null || upload.workspaceId !== workspaceId) throw notFound('File');
        await serve(ctx, workspaceId, upload.file);
      });
    },

    signed(router) {
      // The link is the credential: its signature is checked before anything is looked up, so a
      // forged link learns nothing about which files exist. Refusals are 403 in the short form, as
      // the API's other credential checks answer.
      router.get('/:media_id', async (ctx: ApiContext) => {
        const mediaId = String(ctx.params['media_id']);
        if (!MEDIA_ID.test(mediaId)) throw notFound('File');
        const check = links.check(mediaId, ctx.query['expires'], ctx.query['signature'], core.clock());
        if (check === 'expired') throw short(403, 'This link has expired (links to files of internal notes are valid for 12 hours): download the file through GET /api/v1/media/{id}');
        if (check === 'invalid') throw short(403, 'This link is not signed by this service, or was altered');
        const upload = await uploadOf(mediaId);
        const workspace = upload === null ? undefined : core.directory.workspace(upload.workspaceId);
        if (upload === null || workspace === undefined) throw notFound('File');
        // A blocked project's files are not served, as its API key is refused.
        if (workspace.blocked) throw short(403, 'The project is blocked');
        await serve(ctx, upload.workspaceId, upload.file);
      });
    },

    internal(router) {
      router.put('/workspaces/:workspace_id/media-bucket', async (ctx: ApiContext) => {
        const workspaceId = String(ctx.params['workspace_id']);
        if (core.directory.workspace(workspaceId) === undefined) throw notFound('Workspace');
        const body = decode(BucketBody, ctx.request.body, 'body');
        const result = await core.handle(mediaBucketAggregate, mediaBucketStream(workspaceId), workspaceId, { baseUrl: body.base_url }, ctx.state.scope);
        if (result._tag === 'Left') throw business(result.left);
        ctx.body = { workspace_id: workspaceId, base_url: result.right.state };
      });
    },
  };
};
