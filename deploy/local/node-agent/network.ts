// The pod network of the node agent's nodes: one Linux bridge on this machine (the host's address on it is the gateway,
// where the local Hub listens too), and for each pod a network namespace of its own with one veth pair into the bridge
// and an address from its node's /24. So a pod's IP is real: the worker, the API server and other pods reach it, its
// containers share it and its loopback (the admission sidecar reaches the engine on 127.0.0.1), and two replicas both
// listen on port 8000. Nothing leaves this machine: the bridge has no uplink.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface PodNetworkConfig {
  bridge: string;
  /** The host's address on the bridge, e.g. 10.245.0.1. */
  gateway: string;
  /** Prefix length of the pod network (16: 10.245.0.0/16). */
  prefix: number;
}

export interface PodAddress {
  namespace: string;
  ip: string;
}

const NETNS_PREFIX = 'ferry-pod-';

async function ip(...args: string[]): Promise<string> {
  const { stdout } = await run('ip', args, { timeout: 10_000 });
  return stdout;
}

export class PodNetwork {
  private readonly used = new Set<string>();

  constructor(private readonly config: PodNetworkConfig) {}

  /** The bridge, with the gateway address, up. Idempotent. */
  async ensureBridge(): Promise<void> {
    const { bridge, gateway, prefix } = this.config;
    const links = await ip('-o', 'link', 'show');
    if (!links.includes(` ${bridge}:`)) await ip('link', 'add', bridge, 'type', 'bridge');
    const addrs = await ip('-o', 'addr', 'show', 'dev', bridge);
    if (!addrs.includes(` ${gateway}/`)) await ip('addr', 'add', `${gateway}/${prefix}`, 'dev', bridge);
    await ip('link', 'set', bridge, 'up');
  }

  /** Removes every pod namespace a previous run of the agent left (their veths go with them). */
  async removeLeftovers(): Promise<string[]> {
    const list = await ip('netns', 'list').catch(() => '');
    const names = list
      .split('\n')
      .map((line) => line.split(' ')[0] ?? '')
      .filter((name) => name.startsWith(NETNS_PREFIX));
    for (const name of names) await ip('netns', 'delete', name).catch(() => undefined);
    return names;
  }

  /** The next free address of a node's /24 (`subnet` is its third octet). */
  private allocate(subnet: number): string {
    const base = this.config.gateway.split('.').slice(0, 2).join('.');
    for (let host = 2; host < 255; host++) {
      const candidate = `${base}.${subnet}.${host}`;
      if (!this.used.has(candidate)) {
        this.used.add(candidate);
        return candidate;
      }
    }
    throw new Error(`the pod network ${base}.${subnet}.0/24 is full`);
  }

  /** A network namespace for the pod `uid` on the node whose /24 is `subnet`, with its address. */
  async create(uid: string, subnet: number): Promise<PodAddress> {
    const id = uid.replace(/-/g, '').slice(0, 12);
    const namespace = `${NETNS_PREFIX}${id}`;
    const hostSide = `fv${id}`;
    const address = this.allocate(subnet);
    try {
      await ip('netns', 'delete', namespace).catch(() => undefined);
      await ip('netns', 'add', namespace);
      await ip('link', 'add', hostSide, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', namespace);
      await ip('link', 'set', hostSide, 'master', this.config.bridge, 'up');
      await ip('-n', namespace, 'addr', 'add', `${address}/${this.config.prefix}`, 'dev', 'eth0');
      await ip('-n', namespace, 'link', 'set', 'lo', 'up');
      await ip('-n', namespace, 'link', 'set', 'eth0', 'up');
      await ip('-n', namespace, 'route', 'add', 'default', 'via', this.config.gateway);
    } catch (err) {
      this.used.delete(address);
      await ip('netns', 'delete', namespace).catch(() => undefined);
      throw err;
    }
    return { namespace, ip: address };
  }

  async remove(address: PodAddress): Promise<void> {
    await ip('netns', 'delete', address.namespace).catch(() => undefined);
    this.used.delete(address.ip);
  }
}
