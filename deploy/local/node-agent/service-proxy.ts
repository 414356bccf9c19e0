// kube-proxy's part for the agent's pods: a Service whose endpoints are pods on the agent's nodes gets a TCP proxy on
// 127.0.0.1 that spreads connections over its ready endpoints, read from its EndpointSlices, which the real
// EndpointSlice controller keeps from the pods' Ready condition (set from their real readiness probes). The proxy's
// address stands for the Service's cluster IP, which nothing routes here.
import { createServer, connect, type Server, type Socket } from 'node:net';
import type { DiscoveryV1Api, V1EndpointSlice } from '@kubernetes/client-node';

interface Proxy {
  server: Server;
  port: number;
  backends: string[];
  next: number;
  /** `<namespace>/<instance>` the Service belongs to: the model's name, or `<model>-b` (a rollout's second slot). */
  key: string;
}

export class ServiceProxies {
  private readonly proxies = new Map<string, Proxy>();

  constructor(
    private readonly discovery: DiscoveryV1Api,
    /** Whether an address is a pod of the agent's nodes. */
    private readonly ours: (ip: string) => boolean,
    /** The Service port whose endpoints the proxy forwards to (Ferry's Services name theirs `http`). */
    private readonly portName = 'http',
  ) {}

  /** Re-reads every EndpointSlice; starts a proxy for each new Service of ours and updates the others' backends. */
  async sync(): Promise<boolean> {
    const slices = (await this.discovery.listEndpointSliceForAllNamespaces()).items;
    const byService = new Map<string, V1EndpointSlice[]>();
    for (const slice of slices) {
      const service = slice.metadata?.labels?.['kubernetes.io/service-name'];
      if (!service) continue;
      const id = `${slice.metadata!.namespace}/${service}`;
      byService.set(id, [...(byService.get(id) ?? []), slice]);
    }
    let changed = false;
    for (const [id, list] of byService) {
      const all = list.flatMap((s) => (s.endpoints ?? []).flatMap((e) => e.addresses));
      if (!all.some((ip) => this.ours(ip))) continue;
      const backends: string[] = [];
      for (const slice of list) {
        const port = slice.ports?.find((p) => p.name === this.portName)?.port ?? slice.ports?.[0]?.port;
        if (!port) continue;
        for (const endpoint of slice.endpoints ?? []) {
          if (endpoint.conditions?.ready === false) continue;
          for (const ip of endpoint.addresses) if (this.ours(ip)) backends.push(`${ip}:${port}`);
        }
      }
      backends.sort();
      // The model's name, or for the engine Service of a revision in the model's second slot (a rollout), `<model>-b`:
      // the worker looks it up under that name (activities/builders/names.ts, slotEngineServiceName).
      const service = id.split('/')[1]!;
      const owner = list[0]?.metadata?.labels?.['ferry.dev/model'] ?? service;
      const model = service === `${owner}-b` ? service : owner;
      const existing = this.proxies.get(id);
      if (existing) {
        existing.backends = backends;
        continue;
      }
      this.proxies.set(id, await this.start(`${id.split('/')[0]}/${model}`, backends));
      changed = true;
    }
    for (const [id, proxy] of this.proxies) {
      if (!byService.has(id)) {
        proxy.server.close();
        this.proxies.delete(id);
        changed = true;
      }
    }
    return changed;
  }

  private start(key: string, backends: string[]): Promise<Proxy> {
    const proxy: Proxy = { server: createServer(), port: 0, backends, next: 0, key };
    proxy.server.on('connection', (client: Socket) => {
      if (proxy.backends.length === 0) {
        client.destroy();
        return;
      }
      const target = proxy.backends[proxy.next++ % proxy.backends.length]!;
      const [host, port] = target.split(':');
      const upstream = connect({ host: host!, port: Number(port) });
      client.pipe(upstream).pipe(client);
      const close = () => {
        client.destroy();
        upstream.destroy();
      };
      client.on('error', close);
      upstream.on('error', close);
      client.on('close', close);
      upstream.on('close', close);
    });
    return new Promise((resolve) => {
      proxy.server.listen(0, '127.0.0.1', () => {
        const address = proxy.server.address();
        proxy.port = typeof address === 'object' && address ? address.port : 0;
        resolve(proxy);
      });
    });
  }

  /** `<namespace>/<model>` → the URL standing for its Service. */
  overrides(): Record<string, string> {
    return Object.fromEntries([...this.proxies.values()].map((p) => [p.key, `http://127.0.0.1:${p.port}`]));
  }

  close(): void {
    for (const proxy of this.proxies.values()) proxy.server.close();
    this.proxies.clear();
  }
}
