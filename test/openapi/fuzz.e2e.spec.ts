// The property-based fuzzer driven by the API document: Schemathesis (test/openapi/fuzz, pytest)
// generates schema-valid and schema-violating requests for every operation of a live server and checks
// each answer: no server error, a documented status, a documented content type, a body that fits the
// document, auth enforced. Its Python comes from scripts/openapi-fuzz-venv.sh (installed once).
import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import * as path from 'node:path';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { runProcess, type Finished } from '../support/run-process.js';
import { startTestService, type TestService } from '../support/server.js';

const ROOT = path.resolve(import.meta.dirname, '../..');

/** pytest over test/openapi/fuzz against `url`, with `key` as the API key. */
const fuzz = (python: string, url: string, key: string): Promise<Finished> =>
  runProcess(python, ['-m', 'pytest', '-q', '-p', 'no:cacheprovider', 'test/openapi/fuzz'], {
    cwd: ROOT,
    env: { ...process.env, SP_BASE_URL: url, SP_API_KEY: key },
  });

const report = (run: Finished): string => `exit ${run.code}\n${run.stdout.slice(-20_000)}\n${run.stderr.slice(-5_000)}`;

describe('OpenAPI fuzzer: Schemathesis over every operation of a live server (e2e)', function () {
  this.timeout(300_000);
  let python: string;

  before(() => {
    python = execFileSync('bash', [path.join(ROOT, 'scripts/openapi-fuzz-venv.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
  });

  describe('against the service', () => {
    let test: TestService;

    before(async () => {
      // Rate limits out of the way (a 429 is documented, but would hide what the fuzzer is for).
      test = await startTestService({ RATE_LIMIT_PER_KEY: '1000000000', RATE_LIMIT_PER_IP: '1000000000', PLANS: 'free:1000000:true' });
    });
    after(async () => {
      await test?.close();
    });

    it('finds no server error and no answer, status or content type the document does not describe, on any operation', async () => {
      const ws = await test.createWorkspace();
      const { paths } = (await (await fetch(`${test.url}/api/v1/openapi.json`)).json()) as { paths: Record<string, object> };
      // Schemathesis leaves out the document's own route.
      const fuzzed = Object.entries(paths).flatMap(([p, item]) => (p === '/openapi.json' ? [] : Object.keys(item)));
      const run = await fuzz(python, test.url, ws.apiKey);
      expect(run.code, report(run)).to.equal(0);
      // One pytest case per operation: none skipped or lost.
      expect(fuzzed.length).to.be.greaterThan(20);
      expect(run.stdout, report(run)).to.match(new RegExp(`^${fuzzed.length} passed`, 'm'));
    });
  });

  describe('against a server that breaks its document', () => {
    let liar: Receiver;

    before(async () => {
      liar = await startReceiver();
      const ok = { description: 'A thing', content: { 'application/json': { schema: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] } } } };
      const document = {
        openapi: '3.1.0',
        info: { title: 'liar', version: '1' },
        servers: [{ url: '/api/v1' }],
        security: [{ apiKey: [] }],
        components: { securitySchemes: { apiKey: { type: 'http', scheme: 'bearer' } } },
        paths: {
          '/thing': { get: { responses: { 200: ok } } },
          '/crash': { get: { responses: { 200: ok } } },
        },
      };
      liar.respond((request) =>
        request.path === '/api/v1/openapi.json'
          ? { kind: 'status', status: 200, body: JSON.stringify(document), headers: { 'content-type': 'application/json' } }
          : request.path === '/api/v1/thing'
            ? { kind: 'status', status: 200, body: '{"name":"no id"}', headers: { 'content-type': 'application/json' } }
            : { kind: 'status', status: 500, body: '{}', headers: { 'content-type': 'application/json' } },
      );
    });
    after(async () => {
      await liar?.close();
    });

    it('fails, naming the body that breaks the schema and the server error', async () => {
      const run = await fuzz(python, new URL(liar.url).origin, 'any-key');
      expect(run.code, report(run)).to.equal(1);
      expect(run.stdout, report(run)).to.contain('Response violates schema').and.to.contain('Server error').and.to.match(/^2 failed/m);
    });
  });
});
