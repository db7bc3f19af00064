// A 256-bit server key kept in a file of the data folder when its variable is unset: generated on
// first start (mode 0600) and read by every later start, and by every process sharing the folder.
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';

const KEY_HEX = /^[0-9a-f]{64}$/i;

/** The key in `<dataDir>/<fileName>`, created first when missing; `variable` is the setting that replaces the file. */
export const keyFromFile = (dataDir: string, fileName: string, variable: string): Buffer => {
  const file = path.join(dataDir, fileName);
  fs.mkdirSync(dataDir, { recursive: true });
  if (!fs.existsSync(file)) {
    // Written whole under a name of its own, then linked into place: a link fails when the file exists,
    // so two processes starting at once on a shared folder never overwrite each other's key, and
    // neither reads the other's file before its key is in it.
    const draft = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`;
    fs.writeFileSync(draft, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600, flag: 'wx' });
    try {
      fs.linkSync(draft, file);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    } finally {
      fs.rmSync(draft, { force: true });
    }
  }
  const hex = fs.readFileSync(file, 'utf8').trim();
  if (!KEY_HEX.test(hex)) throw new Error(`${file} does not hold a 256-bit key in hex; remove it or set ${variable}`);
  return Buffer.from(hex, 'hex');
};
