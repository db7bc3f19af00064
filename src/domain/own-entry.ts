// Records keyed by ids that come from requests: any string may arrive, "__proto__", "constructor"
// and "toString" included, and a plain index would find Object.prototype's members for them.

/** The record's own entry for `key`, never an inherited one. */
export const ownEntry = <V>(record: Readonly<Record<string, V>>, key: string): V | undefined => (Object.hasOwn(record, key) ? record[key] : undefined);
