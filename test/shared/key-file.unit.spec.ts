// Server keys kept in the data folder when their variable is unset (webhook secrets, media links).
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { keyFromFile } from '../../src/shared/key-file.js';

const run = promisify(execFile);

describe('keys kept in the data folder (unit)', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'sp-key-file-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('generates the key once (mode 0600), reads it back, and leaves no draft behind', () => {
    const key = keyFromFile(dir, 'k.key', 'K');
    expect(key).to.have.length(32);
    expect(keyFromFile(dir, 'k.key', 'K').equals(key)).to.equal(true);
    expect(statSync(path.join(dir, 'k.key')).mode & 0o777).to.equal(0o600);
    expect(readdirSync(dir)).to.deep.equal(['k.key']);
  });

  it('gives processes starting at once on one folder the same key', async () => {
    // Eight processes race for the file; every one must read a whole key, and the same one.
    const script = `import { keyFromFile } from ${JSON.stringify(path.resolve('src/shared/key-file.ts'))}; console.log(keyFromFile(${JSON.stringify(dir)}, 'k.key', 'K').toString('hex'));`;
    const one = async () => (await run(process.execPath, ['--import', 'tsx', '--input-type=module', '--eval', script])).stdout.trim();
    const keys = await Promise.all(Array.from({ length: 8 }, one));
    expect(new Set(keys).size).to.equal(1);
    expect(readdirSync(dir)).to.deep.equal(['k.key']);
  });

  it('refuses a file that holds no key, naming the variable that replaces it', () => {
    writeFileSync(path.join(dir, 'k.key'), 'not a key\n');
    expect(() => keyFromFile(dir, 'k.key', 'MEDIA_SIGNING_KEY')).to.throw(/MEDIA_SIGNING_KEY/);
  });
});
