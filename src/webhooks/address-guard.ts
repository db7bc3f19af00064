// SSRF guard for webhook deliveries: refuse loopback, private, link-local (cloud metadata at
// 169.254.169.254 included), CGNAT, unique-local, multicast and other special addresses, unless a
// configured CIDR block opens them. The check runs on the RESOLVED address inside the socket's own
// connect (a custom `lookup`), so a DNS answer that changes between a check and the connect
// (rebinding) cannot slip through; IP literals, which skip the lookup, are checked before connecting.
import * as dns from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { buildConnector } from 'undici';

const BLOCKED: readonly (readonly [string, number])[] = [
  ['0.0.0.0', 8], // "this network"; 0.0.0.0 reaches the local host
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, cloud metadata
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15], // benchmarking
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
  ['::', 96], // unspecified, loopback, IPv4-compatible
  ['fc00::', 7], // unique local (includes fd00:ec2::254, AWS metadata)
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
  // Translation prefixes that can lead to internal IPv4 hosts.
  ['64:ff9b::', 96],
  ['64:ff9b:1::', 48],
  ['2002::', 16],
];

const familyOf = (address: string): 'ipv4' | 'ipv6' => (isIP(address) === 6 ? 'ipv6' : 'ipv4');

const blockListOf = (blocks: readonly (readonly [string, number])[]): BlockList => {
  const list = new BlockList();
  for (const [network, prefix] of blocks) list.addSubnet(network, prefix, familyOf(network));
  return list;
};

/** The narrowest block that opens `address`: what to put in WEBHOOK_ALLOWED_NETWORKS for it. */
const blockOf = (address: string): string => `${address}/${familyOf(address) === 'ipv6' ? 128 : 32}`;

// The message is what a developer sees first when a receiver on their own machine is refused (the
// test endpoint's `error`, a delivery's attempt): it names the variable and the value to set.
export class BlockedAddressError extends Error {
  readonly code = 'EADDRBLOCKED';
  constructor(readonly host: string, readonly addresses: readonly string[]) {
    const where = addresses.length === 1 && addresses[0] === host ? host : `${host} (${addresses.join(', ')})`;
    super(
      `${where} is a loopback, private, link-local or other internal address, refused unless WEBHOOK_ALLOWED_NETWORKS opens it: ` +
        `restart the service with WEBHOOK_ALLOWED_NETWORKS=${addresses.map(blockOf).join(',')}`,
    );
    this.name = 'BlockedAddressError';
  }
}

export interface AddressGuard {
  /** True when a delivery may connect to this IP address. (IPv4-mapped IPv6 counts as its IPv4.) */
  isAllowed(address: string): boolean;
  /** dns.lookup that resolves, then drops blocked addresses; fails with BlockedAddressError when none is left. */
  readonly lookup: LookupFunction;
}

/** `allowedNetworks`: CIDR blocks ("127.0.0.0/8") that open otherwise blocked addresses. */
export const createAddressGuard = (allowedNetworks: readonly string[]): AddressGuard => {
  const blocked = blockListOf(BLOCKED);
  const allowed = blockListOf(
    allowedNetworks.map((cidr) => {
      const [network = '', prefix = ''] = cidr.split('/');
      return [network, Number(prefix)] as const;
    }),
  );
  const isAllowed = (address: string): boolean => {
    if (isIP(address) === 0) return false;
    const family = familyOf(address);
    return allowed.check(address, family) || !blocked.check(address, family);
  };
  const lookup: LookupFunction = (hostname, options, callback) => {
    dns.lookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error !== null) return callback(error, '', 0);
      const usable = addresses.filter((a) => isAllowed(a.address));
      const first = usable[0];
      if (first === undefined) return callback(new BlockedAddressError(hostname, addresses.map((a) => a.address)), '', 0);
      // net.connect asks for all addresses when it races families (autoSelectFamily), else for one.
      if (options.all === true) return (callback as unknown as (e: null, a: dns.LookupAddress[]) => void)(null, usable);
      callback(null, first.address, first.family);
    });
  };
  return { isAllowed, lookup };
};

/** An undici connector that only ever opens sockets to addresses the guard allows. */
export const guardedConnector = (guard: AddressGuard, options: buildConnector.BuildOptions = {}): buildConnector.connector => {
  const connect = buildConnector({ ...options, lookup: guard.lookup } as buildConnector.BuildOptions);
  return (target, callback) => {
    const host = target.hostname.replace(/^\[(.*)\]$/, '$1');
    // An IP literal never reaches `lookup`: check it here.
    if (isIP(host) !== 0 && !guard.isAllowed(host)) {
      queueMicrotask(() => callback(new BlockedAddressError(host, [host]), null));
      return;
    }
    connect(target, callback);
  };
};
