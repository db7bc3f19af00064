// When this thread's event loop last ran its timers. A thread that stalled (a long synchronous task,
// or the process descheduled for seconds on a loaded host) runs the callbacks that were waiting
// before its next timers phase: what a timer keeps current (a tail polling a shared log) is then as
// old as the stall, while the code resuming from before it may act on what it read back then.
export interface EventLoopTurns {
  /** performance.now() when the timers last ran (within `everyMs` of it on a loop that is not stalled). */
  lastTurn(): number;
  stop(): void;
}

export const watchEventLoopTurns = (everyMs = 10): EventLoopTurns => {
  let last = performance.now();
  const timer = setInterval(() => void (last = performance.now()), everyMs).unref();
  return {
    lastTurn: () => last,
    stop: () => clearInterval(timer),
  };
};
