// Media files: the log records each upload's metadata in stream `media-<id>` (the bytes live in the
// MediaStore), and a workspace's own object-storage bucket in `media-bucket-<workspace>`. All
// internal events; the messages feature validates `media_ids` by reading the media stream.
import { left, right } from 'fp-ts/lib/Either.js';
import type { Aggregate } from '../aggregate.js';
import { domainError } from '../errors.js';

export const MEDIA_UPLOADED = 'media.uploaded';
export const MEDIA_BUCKET_SET = 'media.bucket_set';

export const mediaStream = (mediaId: string): string => `media-${mediaId}`;
export const mediaBucketStream = (workspaceId: string): string => `media-bucket-${workspaceId}`;

/** Where the object's bytes live in a MediaStore or a workspace bucket. */
export const mediaObjectKey = (workspaceId: string, mediaId: string): string => `${workspaceId}/${mediaId}`;

/** The chat-internal address of a file, as message media items carry it (spec "Events" notes). */
export const mediaUrl = (mediaId: string): string => `/api/media/${mediaId}`;

export interface MediaFile {
  readonly media_id: string;
  readonly file_name: string;
  readonly content_type: string;
  readonly size: number;
  readonly url: string;
}

export type MediaState = MediaFile | null;

export interface RecordUpload {
  readonly mediaId: string;
  readonly fileName: string;
  readonly contentType: string;
  readonly size: number;
}

const evolve: Aggregate<MediaState, RecordUpload>['evolve'] = (state, { type, data }) =>
  type === MEDIA_UPLOADED
    ? {
        media_id: String(data['media_id']),
        file_name: String(data['file_name']),
        content_type: String(data['content_type']),
        size: Number(data['size']),
        url: String(data['url']),
      }
    : state;

const decide: Aggregate<MediaState, RecordUpload>['decide'] = (command, state) => {
  if (state !== null) return left(domainError('CONFLICT', 'This media id is already used', { media_id: command.mediaId }));
  const file: MediaFile = {
    media_id: command.mediaId,
    file_name: command.fileName,
    content_type: command.contentType,
    size: command.size,
    url: mediaUrl(command.mediaId),
  };
  return right([{ type: MEDIA_UPLOADED, data: { ...file } }]);
};

export const mediaAggregate: Aggregate<MediaState, RecordUpload> = { initial: null, evolve, decide };

/** A workspace's own bucket: GET media answers 302 to `<baseUrl>/<object key>` while it is set. */
export type BucketState = string | null;

export interface SetBucket {
  readonly baseUrl: string | null;
}

export const mediaBucketAggregate: Aggregate<BucketState, SetBucket> = {
  initial: null,
  evolve: (state, { type, data }) => (type === MEDIA_BUCKET_SET ? (typeof data['base_url'] === 'string' ? data['base_url'] : null) : state),
  decide: (command, state) => right(command.baseUrl === state ? [] : [{ type: MEDIA_BUCKET_SET, data: { base_url: command.baseUrl } }]),
};
