// Message attachments: a media id is usable when its upload (an internal media.uploaded event in
// stream media-<id>, written by the media feature) belongs to the caller's workspace.
import { left, right, type Either } from 'fp-ts/lib/Either.js';
import type { EventLog } from '../log/event-log.js';
import { MEDIA_UPLOADED, mediaStream } from '../domain/media/media.js';
import type { MediaItem } from '../domain/ticket/commands.js';
import { domainError, type DomainError } from '../domain/errors.js';

export const resolveMedia = async (log: EventLog, workspaceId: string, mediaIds: readonly string[]): Promise<Either<DomainError, MediaItem[]>> => {
  const ids = [...new Set(mediaIds)];
  const uploads = await Promise.all(ids.map(async (id) => (await log.readStream(mediaStream(id))).find((e) => e.type === MEDIA_UPLOADED)));
  const items: MediaItem[] = [];
  for (const [i, upload] of uploads.entries()) {
    if (upload === undefined || upload.workspaceId !== workspaceId) {
      return left(domainError('VALIDATION_ERROR', 'A file in media_ids is not from this workspace', { field: 'media_ids', reason: 'unknown_media', media_id: ids[i] ?? '' }));
    }
    const d = upload.data;
    items.push({ id: String(d['media_id']), url: String(d['url']), file_name: String(d['file_name']), content_type: String(d['content_type']), size: Number(d['size']) });
  }
  return right(items);
};
