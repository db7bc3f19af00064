// docker-compose.yml cannot run here (no Docker engine): this checks what can be checked statically.
// Every role service is a valid ROLE, sets only variables src/config/config.ts reads, and its whole
// environment passes loadConfig; the engines are the pinned images with healthchecks.
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { CONFIG_VARIABLES, loadConfig } from '../../src/config/config.js';

interface Service {
  readonly image?: string;
  readonly build?: unknown;
  readonly environment?: Record<string, string>;
  readonly ports?: string[];
  readonly depends_on?: Record<string, { condition: string }>;
  readonly healthcheck?: { test: string[] };
  readonly deploy?: { replicas?: number };
}

const compose = parse(readFileSync('docker-compose.yml', 'utf8'), { merge: true }) as { services: Record<string, Service> };
const services = Object.entries(compose.services);
const roleServices = services.filter(([, s]) => s.build !== undefined);

/** Compose interpolation of the forms the file uses: ${NAME}, ${NAME:-default}, ${NAME:?error}. */
const SECRETS: Record<string, string> = { ADMIN_TOKEN: 'admin-token', WEBHOOK_SECRET_KEY: 'ab'.repeat(32) };
const interpolate = (value: string): string =>
  value.replace(/\$\{(\w+)(?::([-?])([^}]*))?\}/g, (_, name: string, kind?: string, rest?: string) => SECRETS[name] ?? (kind === '-' ? (rest ?? '') : ''));

const envOf = (service: Service): Record<string, string> =>
  Object.fromEntries(Object.entries(service.environment ?? {}).map(([k, v]) => [k, interpolate(String(v))]));

const replicas = (service: Service): number => service.deploy?.replicas ?? 1;

describe('docker-compose.yml', () => {
  it('lists exactly the variables config.ts reads in CONFIG_VARIABLES', () => {
    const source = readFileSync('src/config/config.ts', 'utf8');
    const read = new Set([...source.matchAll(/\(env, '([A-Z0-9_]+)'/g)].map((m) => m[1]));
    expect([...CONFIG_VARIABLES].sort()).to.deep.equal([...read].sort());
  });

  it('runs two api servers on two host ports, one relay and two dispatchers', () => {
    const count = (role: string) => roleServices.filter(([, s]) => s.environment?.['ROLE'] === role).reduce((n, [, s]) => n + replicas(s), 0);
    expect({ api: count('api'), relay: count('relay'), dispatcher: count('dispatcher') }).to.deep.equal({ api: 2, relay: 1, dispatcher: 2 });
    const apiPorts = roleServices.filter(([, s]) => s.environment?.['ROLE'] === 'api').flatMap(([, s]) => s.ports ?? []);
    expect(new Set(apiPorts.map((p) => p.split(':')[0])).size).to.equal(2);
  });

  for (const [name, service] of roleServices) {
    describe(`role service ${name}`, () => {
      it('sets only variables config.ts reads, and they load', () => {
        const env = envOf(service);
        expect(Object.keys(env).filter((k) => !(CONFIG_VARIABLES as readonly string[]).includes(k))).to.deep.equal([]);
        const config = loadConfig(env);
        expect(config.role).to.equal(env['ROLE']);
        expect(config.eventstoreUrl).to.match(/^esdb:\/\/eventstore:2113/);
        expect(config.kafkaBrokers).to.deep.equal(['kafka:9092']);
        expect(config.redisUrl).to.equal('redis://redis:6379');
        expect(config.webhooks.secretKey).to.equal(SECRETS['WEBHOOK_SECRET_KEY']);
        expect(config.webhooks.previousSecretKeys).to.deep.equal([]);
      });

      it('waits for healthy engines and is healthy when /readyz answers', () => {
        expect(Object.keys(service.depends_on ?? {}).sort()).to.deep.equal(['eventstore', 'kafka', 'redis']);
        expect(Object.values(service.depends_on ?? {}).every((d) => d.condition === 'service_healthy')).to.equal(true);
        expect(service.healthcheck?.test.join(' ')).to.include(`127.0.0.1:${envOf(service)['PORT']}/readyz`);
      });
    });
  }

  it('pins the engines and gives each a healthcheck', () => {
    const image = (name: string) => compose.services[name]?.image;
    expect([image('eventstore'), image('kafka'), image('redis')]).to.deep.equal(['eventstore/eventstore:24.10', 'apache/kafka:3.9.1', 'redis:7']);
    const eventstore = envOf(compose.services['eventstore'] as Service);
    expect(eventstore).to.include({ EVENTSTORE_INSECURE: 'true', EVENTSTORE_RUN_PROJECTIONS: 'None' });
    expect(envOf(compose.services['kafka'] as Service)['KAFKA_PROCESS_ROLES']).to.equal('broker,controller');
    for (const name of ['eventstore', 'kafka', 'redis']) expect(compose.services[name]?.healthcheck?.test, name).to.be.an('array');
  });

  it('builds the roles from the Dockerfile: node 20 slim, npm run build, node dist/src/main.js (test/deploy/compiled.e2e.spec.ts runs that build)', () => {
    const dockerfile = readFileSync('Dockerfile', 'utf8');
    expect(dockerfile).to.match(/^FROM node:20-bookworm-slim AS build$/m);
    expect(dockerfile).to.match(/^FROM node:20-bookworm-slim$/m);
    expect(dockerfile).to.match(/^RUN npm run build$/m);
    expect(dockerfile).to.match(/^RUN npm ci --omit=dev\b/m);
    expect(dockerfile).to.match(/^COPY --from=build \/app\/dist \.\/dist$/m);
    expect(dockerfile).to.match(/^CMD \["node", "dist\/src\/main\.js"\]$/m);
    const build = JSON.parse(readFileSync('tsconfig.build.json', 'utf8')) as { compilerOptions: { outDir: string } };
    expect(build.compilerOptions.outDir).to.equal('dist');
    expect((JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: Record<string, string> }).scripts['build']).to.equal('tsc -p tsconfig.build.json');
  });
});
