// The contact read model: one row per contact, from the contact aggregate's internal events.
import { CONTACT_BLOCKED, CONTACT_CHANGED, CONTACT_FIELDS, CONTACT_REGISTERED, CONTACT_UNBLOCKED, type ContactFields } from '../src/domain/contact/contact.js';
import type { JsonObject } from '../src/log/event-log.js';
import { textOf, type DocumentProjection } from './tickets-store.js';

export interface ContactRow extends ContactFields {
  readonly id: string;
  readonly workspace_id: string;
  readonly blocked: boolean;
  readonly created_at: string;
}

const fieldsIn = (data: JsonObject): Partial<ContactFields> =>
  Object.fromEntries(CONTACT_FIELDS.filter((f) => f in data).map((f) => [f, textOf(data[f])]));

export const contactProjection: DocumentProjection<ContactRow> = {
  name: 'contacts',
  version: 1,
  types: [CONTACT_REGISTERED, CONTACT_CHANGED, CONTACT_BLOCKED, CONTACT_UNBLOCKED],
  filters: [],
  keyOf: ({ data }) => textOf(data['contact_id']),
  evolve(row, { type, data }) {
    if (type === CONTACT_REGISTERED) {
      const fields: ContactFields = { internal_id: null, email: null, full_name: null, phone: null, telegram_id: null, ...fieldsIn(data) };
      return { id: String(data['contact_id']), workspace_id: String(data['workspace_id']), ...fields, blocked: false, created_at: String(data['created_at']) };
    }
    if (row === undefined) return undefined;
    if (type === CONTACT_CHANGED) return { ...row, ...fieldsIn(data) };
    return { ...row, blocked: type === CONTACT_BLOCKED };
  },
  partitionOf: (row) => row.workspace_id,
};
