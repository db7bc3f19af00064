// A long-poll consumer of /api/v1/updates: keeps its offset, waits on 429 and backs off on 5xx.
// Node.js built-ins only; run with `npx tsx poll-updates.ts` (KEY set; URL default http://localhost:8080).
const key = process.env['KEY'];
if (key === undefined || key === '') throw new Error('set KEY to your API key');
const base = process.env['URL'] ?? 'http://localhost:8080';

interface Item {
  readonly id: string;
  readonly type: string;
  readonly timestamp: string;
  readonly data: Record<string, unknown>;
  readonly offset: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const main = async (): Promise<void> => {
  // Start from now (offsets are microseconds since the epoch); OFFSET=0 reads the whole history.
  let offset = process.env['OFFSET'] === undefined ? Date.now() * 1000 : Number(process.env['OFFSET']);
  let backoff = 1000;
  const until = process.env['STOP_AFTER'] === undefined ? Infinity : Number(process.env['STOP_AFTER']);
  for (let handled = 0; handled < until; ) {
    const response = await fetch(`${base}/api/v1/updates?offset=${offset}&timeout=30`, { headers: { authorization: `Bearer ${key}` } }).catch(() => null);
    if (response === null || response.status >= 500) {
      await sleep(backoff); // unreachable or 5xx: retry with growing pauses
      backoff = Math.min(backoff * 2, 30_000);
      continue;
    }
    if (response.status === 429) {
      await sleep(Number(response.headers.get('retry-after') ?? 1) * 1000);
      continue;
    }
    if (response.status !== 200) throw new Error(`GET /api/v1/updates answered ${response.status}: ${await response.text()}`);
    backoff = 1000;
    const page = (await response.json()) as { items: Item[]; next_offset: number };
    for (const item of page.items) {
      console.log(`${item.timestamp} ${item.type} ${item.id} ${JSON.stringify(item.data)}`);
      handled += 1;
    }
    offset = page.next_offset; // store it to resume after a restart
  }
};

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
