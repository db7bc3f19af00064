// Microseconds since the Unix epoch. performance.timeOrigin + now() gives sub-millisecond precision
// that Date.now() lacks; the sequencer still forces strict increase per workspace.
export type MicrosClock = () => number;

/** Fixed for the life of a process (or thread); read once, as its getter costs about as much as the rest of a call. */
const origin = performance.timeOrigin;

export const systemMicros: MicrosClock = () => Math.floor((origin + performance.now()) * 1000);
