// At least once across a crash: the service runs as a child process (npm start's entry point), takes
// a burst of events, is killed with SIGKILL mid-burst, restarts on the same data folder, and every
// event it acknowledged still reaches the receiver (repeats allowed, with the same X-Webhook-Id).
import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { call } from '../support/server.js';
import { eventually, header } from '../support/webhooks-dispatch.js';

const ADMIN = 'crash-admin-token';

interface Child {
  readonly process: ChildProcess;
  readonly url: string;
  readonly apiKey: string | null;
  readonly workspaceId: string | null;
}

const spawnService = (dataDir: string): Promise<Child> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      env: { ...process.env, PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, ADMIN_TOKEN: ADMIN, WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString('utf8');
      const url = /listening on (http:\/\/\S+)/.exec(out)?.[1];
      if (url === undefined) return;
      resolve({
        process: child,
        url,
        apiKey: /API key \(shown once, keep it\): (\S+)/.exec(out)?.[1] ?? null,
        workspaceId: /Created the first workspace (\w+)\./.exec(out)?.[1] ?? null,
      });
    });
    child.once('exit', (code) => reject(new Error(`service exited early with ${code}: ${out}`)));
  });

const stopped = (child: ChildProcess): Promise<void> =>
  new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });

describe('webhook delivery across kill -9 (e2e)', function () {
  this.timeout(60_000);
  let receiver: Receiver;
  let dataDir: string;
  let children: ChildProcess[] = [];

  beforeEach(async () => {
    receiver = await startReceiver();
    dataDir = mkdtempSync(path.join(tmpdir(), 'sp-crash-'));
  });

  afterEach(async () => {
    for (const child of children) {
      child.kill('SIGTERM');
      await stopped(child);
    }
    children = [];
    await receiver.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('delivers every acknowledged event at least once after SIGKILL during a burst', async () => {
    const first = await spawnService(dataDir);
    children.push(first.process);
    const { apiKey, workspaceId } = first;
    if (apiKey === null || workspaceId === null) throw new Error('no first workspace printed');
    const created = await call(`${first.url}/api/v1/webhooks`, 'POST', apiKey, { url: receiver.url, events: ['operator.status.changed'] });
    expect(created.status).to.equal(201);

    // A slow receiver keeps deliveries behind the acknowledgements, so the kill leaves some to the restart.
    receiver.respond({ kind: 'delay', ms: 1000, status: 200 });
    // Eight writers post distinct operators' status changes until the process dies under them.
    const acknowledged: string[] = [];
    let next = 0;
    let killed = false;
    const writer = async (): Promise<void> => {
      for (;;) {
        const user = `op-${next++}`;
        try {
          const reply = await call(`${first.url}/internal/v1/workspaces/${workspaceId}/operators/${user}/status`, 'POST', ADMIN, { status: 'online' });
          if (reply.status !== 200) throw new Error(`status ${reply.status}: ${JSON.stringify(reply.body)}`);
          acknowledged.push(user);
        } catch (error) {
          if (killed) return;
          throw error;
        }
      }
    };
    const writers = Array.from({ length: 8 }, writer);
    // Generous: a loaded machine (the test lanes side by side) acknowledges far more slowly.
    await eventually('a burst under way', () => acknowledged.length >= 150, 30_000);
    killed = true;
    first.process.kill('SIGKILL');
    await Promise.all(writers);
    await stopped(first.process);
    const beforeRestart = new Set(receiver.requests.map((r) => JSON.parse(r.body.toString('utf8')).data.user_id as string));

    receiver.respond({ kind: 'status', status: 200 });
    const second = await spawnService(dataDir);
    children.push(second.process);
    const received = () => new Set(receiver.requests.map((r) => JSON.parse(r.body.toString('utf8')).data.user_id as string));
    await eventually('every acknowledged event delivered', () => acknowledged.every((user) => received().has(user)), 30_000);

    expect(acknowledged.some((user) => !beforeRestart.has(user)), 'the crash left deliveries to the restart').to.equal(true);
    const idsByEvent = new Map<string, Set<string>>();
    for (const request of receiver.requests) {
      const eventId = JSON.parse(request.body.toString('utf8')).id as string;
      idsByEvent.set(eventId, (idsByEvent.get(eventId) ?? new Set()).add(header(request, 'x-webhook-id')));
    }
    for (const ids of idsByEvent.values()) expect(ids.size).to.equal(1);
  });
});
