// Microseconds since the Unix epoch. performance.timeOrigin + now() gives sub-millisecond precision
// that Date.now() lacks; the sequencer still forces strict increase per workspace.
export type MicrosClock = () => number;

export const systemMicros: MicrosClock = () => Math.floor((performance.timeOrigin + performance.now()) * 1000);
