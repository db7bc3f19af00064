import { expect } from 'chai';
import { createAddressGuard } from '../../src/webhooks/address-guard.js';

const BLOCKED = [
  '127.0.0.1', '127.255.0.9', '0.0.0.0', '10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.1.1', '100.64.0.1',
  '169.254.169.254', '224.0.0.1', '255.255.255.255', '::', '::1', '::ffff:127.0.0.1', '::ffff:10.0.0.1', 'fd00::1',
  'fd00:ec2::254', 'fe80::1', 'ff02::1', '64:ff9b::a00:1', '2002:7f00:1::1',
];
const PUBLIC = ['8.8.8.8', '1.1.1.1', '172.32.0.1', '100.128.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8'];

describe('webhook address guard', () => {
  const guard = createAddressGuard([]);

  for (const address of BLOCKED) it(`refuses ${address} by default`, () => expect(guard.isAllowed(address)).to.equal(false));
  for (const address of PUBLIC) it(`allows ${address}`, () => expect(guard.isAllowed(address)).to.equal(true));

  it('refuses what is not an IP address', () => expect(guard.isAllowed('example.com')).to.equal(false));

  it('opens exactly the configured networks', () => {
    const open = createAddressGuard(['127.0.0.0/8', '::1/128']);
    expect(open.isAllowed('127.0.0.1')).to.equal(true);
    expect(open.isAllowed('::1')).to.equal(true);
    expect(open.isAllowed('::ffff:127.0.0.1')).to.equal(true);
    expect(open.isAllowed('10.0.0.1')).to.equal(false);
    expect(open.isAllowed('169.254.169.254')).to.equal(false);
  });

  it('resolves names and refuses when every address is blocked', async () => {
    const resolved = (host: string, all: boolean) =>
      new Promise<unknown>((resolve, reject) => guard.lookup(host, { all }, (error, address) => (error === null ? resolve(address) : reject(error))));
    const error = await resolved('localhost', false).catch((e: unknown) => e);
    expect(error).to.have.property('code', 'EADDRBLOCKED');
    const open = createAddressGuard(['127.0.0.0/8', '::1/128']);
    const address = await new Promise((resolve, reject) => open.lookup('localhost', {}, (e, a) => (e === null ? resolve(a) : reject(e))));
    expect(['127.0.0.1', '::1']).to.include(address);
  });
});
