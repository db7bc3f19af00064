// Progress of a long command-line run, on stderr (stdout may be the data): a line at most every
// `everyMs`, with the count so far and the rate.
export const progressReporter = (what: string, everyMs = 2000, write: (line: string) => void = (line) => process.stderr.write(`${line}\n`)): ((count: number) => void) => {
  const started = performance.now();
  let last = started;
  return (count) => {
    const now = performance.now();
    if (now - last < everyMs) return;
    last = now;
    write(`${what}: ${count} events so far (${Math.round(count / ((now - started) / 1000))} events/s)`);
  };
};
