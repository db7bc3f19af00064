// Starts the real service on an ephemeral port over a fresh data folder, for HTTP tests.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { loadConfig } from '../../src/config/config.js';
import type { MicrosClock } from '../../src/log/clock.js';
import { startService, type Service } from '../../src/service.js';

export const ADMIN_TOKEN = 'test-admin-token';

export interface Reply {
  readonly status: number;
  readonly headers: Headers;
  /** Parsed JSON when the body is JSON, else the text ('' for none). */
  readonly body: any;
}

export const call = async (url: string, method: string, token: string | null, body?: unknown, headers: Record<string, string> = {}): Promise<Reply> => {
  const init: RequestInit = { method, headers: { ...(token === null ? {} : { authorization: `Bearer ${token}` }), ...headers } };
  if (body !== undefined) {
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
    (init.headers as Record<string, string>)['content-type'] ??= 'application/json';
  }
  const response = await fetch(url, init);
  const text = await response.text();
  let parsed: unknown = text;
  if ((response.headers.get('content-type') ?? '').includes('json') && text !== '') parsed = JSON.parse(text);
  return { status: response.status, headers: response.headers, body: parsed };
};

export interface TestWorkspace {
  readonly workspaceId: string;
  readonly apiKey: string;
  api(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<Reply>;
}

export interface TestService {
  readonly service: Service;
  readonly url: string;
  readonly dataDir: string;
  admin(method: string, path: string, body?: unknown): Promise<Reply>;
  createWorkspace(plan?: string): Promise<TestWorkspace>;
  close(): Promise<void>;
}

export const startTestService = async (env: Record<string, string> = {}, options: { clock?: MicrosClock; dataDir?: string } = {}): Promise<TestService> => {
  const dataDir = options.dataDir ?? mkdtempSync(path.join(tmpdir(), 'sp-test-'));
  const config = loadConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, ADMIN_TOKEN, WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8,::1/128', ...env });
  const service = await startService(config, options.clock === undefined ? {} : { clock: options.clock });
  const url = service.url;
  const admin = (method: string, p: string, body?: unknown) => call(`${url}${p}`, method, ADMIN_TOKEN, body);
  return {
    service,
    url,
    dataDir,
    admin,
    async createWorkspace(plan) {
      const created = await admin('POST', '/admin/v1/workspaces', { name: 'test', ...(plan === undefined ? {} : { plan }) });
      if (created.status !== 201) throw new Error(`workspace creation failed: ${created.status} ${JSON.stringify(created.body)}`);
      const apiKey = String(created.body.api_key);
      return {
        workspaceId: String(created.body.workspace_id),
        apiKey,
        api: (method, p, body, headers) => call(`${url}${p}`, method, apiKey, body, headers),
      };
    },
    async close() {
      await service.close();
      if (options.dataDir === undefined) rmSync(dataDir, { recursive: true, force: true });
    },
  };
};
