// Our event ids are 32 lowercase hex characters; EventStoreDB takes and returns UUID strings. The
// mapping only inserts or removes the four dashes, so it is lossless both ways.

const HEX_ID = /^[0-9a-f]{32}$/;
const UUID = /^([0-9a-f]{8})-([0-9a-f]{4})-([0-9a-f]{4})-([0-9a-f]{4})-([0-9a-f]{12})$/;

export const isEventId = (id: string): boolean => HEX_ID.test(id);

export const eventIdToUuid = (id: string): string => {
  if (!isEventId(id)) throw new TypeError(`event id must be 32 lowercase hex characters: ${JSON.stringify(id)}`);
  return `${id.slice(0, 8)}-${id.slice(8, 12)}-${id.slice(12, 16)}-${id.slice(16, 20)}-${id.slice(20)}`;
};

/** The event id of a UUID the server returns; null for a UUID our ids cannot have produced. */
export const uuidToEventId = (uuid: string): string | null => {
  const match = UUID.exec(uuid.toLowerCase());
  return match === null ? null : match.slice(1).join('');
};
