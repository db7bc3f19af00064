// The filesystem MediaStore's recovery: partial files of writers that are gone are removed at start,
// a write still running in a live process is left alone, and finished objects are never touched.
import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { Readable } from 'node:stream';
import { createFilesystemMediaStore } from '../../src/media/filesystem.js';

/** The id of a process that has already exited. */
const deadPid = (): number => Number(spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' }).stdout);

describe('filesystem media store (int)', () => {
  it('removes partial files of dead or long-silent writers and keeps live writes and objects', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'media-store-'));
    mkdirSync(path.join(root, 'ws1'));
    const file = (name: string) => {
      writeFileSync(path.join(root, 'ws1', name), 'x');
      return name;
    };
    file(`obj1.${deadPid()}.abc123.part`);
    const running = file(`obj2.${process.pid}.def456.part`);
    const silent = file(`obj3.${process.pid}.fed654.part`);
    const old = new Date(Date.now() - 2 * 60 * 60 * 1000);
    utimesSync(path.join(root, 'ws1', silent), old, old);
    const object = file('obj4');

    const store = createFilesystemMediaStore(root);
    expect(await store.removeAbandoned()).to.equal(2);
    expect(readdirSync(path.join(root, 'ws1')).sort()).to.deep.equal([object, running].sort());
  });

  it('finds nothing to remove in a folder that does not exist yet', async () => {
    expect(await createFilesystemMediaStore(path.join(tmpdir(), 'no-such-media-folder-xyz')).removeAbandoned()).to.equal(0);
  });

  it('names a write in progress with its process id, and removes it when the write fails', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'media-store-'));
    const store = createFilesystemMediaStore(root);
    const content = new Readable({ read() {} });
    const writing = store.put('ws/obj', content);
    content.push(Buffer.from('partial'));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(readdirSync(path.join(root, 'ws'))).to.satisfy((names: string[]) => names.length === 1 && names[0]?.startsWith(`obj.${process.pid}.`));
    content.destroy(new Error('client went away'));
    await writing.then(
      () => expect.fail('the write should fail'),
      (error: Error) => expect(error.message).to.equal('client went away'),
    );
    expect(readdirSync(path.join(root, 'ws'))).to.deep.equal([]);
  });
});
