// Request bodies and query strings of the tickets feature, as io-ts codecs (decoded at the edge).
import * as t from 'io-ts';
import { TicketPriority, TicketStatus } from '../domain/catalogue.js';
import { describedAs } from '../http/json-schema.js';
import { boundedInt, jsonInt, text } from '../http/validation.js';

const nullable = <C extends t.Mixed>(codec: C) => t.union([codec, t.null]);

/** Telegram user ids are integers; accepted as a number or a string, kept as a string. */
const TelegramId = describedAs(new t.Type<string, string, unknown>(
  'telegram id (string or integer)',
  (u): u is string => typeof u === 'string',
  (u, c) => (typeof u === 'string' && u.length <= 64 ? t.success(u) : Number.isSafeInteger(u) ? t.success(String(u)) : t.failure(u, c, 'Input should be a string or an integer')),
  (s) => s,
), { anyOf: [{ type: 'string', maxLength: 64 }, { type: 'integer' }] });

export const ContactInput = t.exact(
  t.partial({
    telegram_id: nullable(TelegramId),
    email: nullable(text(254)),
    full_name: nullable(text(200)),
    phone: nullable(text(64)),
    internal_id: nullable(text(200)),
  }),
);
export type ContactInput = t.TypeOf<typeof ContactInput>;

const MediaIds = t.array(text(64));
const Content = text(10_000);

export const MessageBody = t.partial({ content: Content, media_ids: MediaIds });

export const CreateTicket = t.intersection([
  t.type({ contact: ContactInput }),
  t.partial({ subject: nullable(text(500)), priority: TicketPriority, message: t.union([Content, t.exact(MessageBody)]) }),
]);

export const PatchTicket = t.partial({ subject: nullable(text(500)), priority: TicketPriority, status: TicketStatus });

export const RateTicket = t.intersection([t.type({ rating: jsonInt(1, 5) }), t.partial({ comment: nullable(text(2000)) })]);

export const InboundMessage = t.intersection([t.type({ content: Content }), t.partial({ ticket_id: text(64), contact: ContactInput })]);

const Paging = { page: boundedInt(1, 1_000_000), page_size: boundedInt(1, 100) };

export const PageQuery = t.partial(Paging);

export const TicketListQuery = t.partial({ ...Paging, status: TicketStatus, contact_id: text(64) });

export const pagingOf = (query: { page?: number; page_size?: number }) => ({ page: query.page ?? 1, pageSize: query.page_size ?? 20 });

// Internal surface (catalogue events the public API cannot cause).
export const AssignBody = t.intersection([t.type({ operator_id: text(64), operator_name: text(200) }), t.partial({ operator_avatar_url: nullable(text(2000)) })]);
export const TransferBody = t.intersection([
  t.type({ department_id: text(64), department_name: text(200) }),
  t.partial({ operator_id: nullable(text(64)), operator_name: nullable(text(200)) }),
]);
export const ForceTakeBody = t.type({ operator_id: text(64) });
/** The widget's rating: stars only (a comment comes with ratings through the API). */
export const WidgetRatingBody = t.type({ rating: jsonInt(1, 5) });
export const OperatorMessageBody = t.intersection([
  t.type({ sender: t.keyof({ operator: null, system: null }) }),
  t.partial({ content: Content, media_ids: MediaIds, operator_id: text(64), operator_name: nullable(text(200)), is_internal: t.boolean }),
]);
export const EditMessageBody = t.type({ content: Content });
export const ReactionBody = t.type({ reactor_kind: t.keyof({ visitor: null, operator: null }), reactor_id: text(64), emoji: text(32) });
export const WidgetSettingsBody = t.type({ visitor_notifications: t.boolean });
export const ReplyWaitingBody = t.intersection([
  t.type({ message_id: text(64), operator_name: text(200) }),
  t.partial({ locale: text(16), surface: text(32), open_url: text(2000) }),
]);
