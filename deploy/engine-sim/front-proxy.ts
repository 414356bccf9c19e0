// Local runs only: a model's front pods (spec.front; docs/design/scaling.md, section 6), which under KWOK run
// nothing, played by Debian's HAProxy (installed by deploy/local/install.sh) with each pod's own configuration from
// its ConfigMap, its addresses moved onto 127.0.0.1; and the engine's own Service, `<name>-engine`, which the front
// sends requests to, played by a port that accepts connections while one of the model's stand-ins is ready and
// refuses them (nothing listens) while none is, as kube-proxy rejects a connection to a Service with no endpoint.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const HAPROXY = '/usr/sbin/haproxy';
/** The front's exporter port in its pod (activities/builders/front-objects.ts FRONT_METRICS_PORT). */
const POD_METRICS_PORT = 9101;
/** What the kubelet probes: HAProxy's monitor-uri on the exporter's port. */
const READY_PATH = '/ready';

/**
 * A front pod's haproxy.cfg on loopback: the model's port bound to `bind`, the exporter's to `metricsBind`, and each
 * revision's engine Service (`<service>.<namespace>.svc:<port>`) replaced by `engine(<service>)`, and `noreuseport` in
 * its global section. Everything else is the pod's.
 */
export function loopbackFrontConfig(
  config: string,
  to: { bind: string; metricsBind: string; engine: (service: string) => string },
): string {
  let binds = 0;
  let servers = 0;
  const lines = config.split('\n').flatMap((line) => {
    // Each pod has its own address; on one host, a port another HAProxy holds must fail the start rather than be
    // shared (SO_REUSEPORT, HAProxy's default), which would hand some connections to the other.
    if (line === 'global') return [line, '  noreuseport'];
    const bind = /^(\s*)bind :(\d+)\s*$/.exec(line);
    if (bind) {
      binds++;
      return `${bind[1]}bind ${Number(bind[2]) === POD_METRICS_PORT ? to.metricsBind : to.bind}`;
    }
    const server = /^(\s*)server (\S+) ([a-z0-9-]+)\.[a-z0-9-]+\.svc:\d+( .*)?$/.exec(line);
    if (server) {
      servers++;
      return `${server[1]}server ${server[2]} ${to.engine(server[3]!)}${server[4] ?? ''}`;
    }
    return line;
  });
  if (!lines.includes('  noreuseport') || binds !== 2 || servers < 1) {
    throw new Error(
      `the front's configuration has ${binds} bind and ${servers} server lines and a global section: not 2, at least 1 and one`,
    );
  }
  return lines.join('\n');
}

/** A free port on 127.0.0.1 (free when asked: another process may take it before it is used). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * Service ports come from below the kernel's ephemeral range (32768–60999), which every listen(0) and outbound
 * connection draws from: a Service listens only while it has a ready target, and a port from that range could be
 * taken by another socket in between, after which the Service's address would reach someone else's server (a stand-in
 * answering for another model). Within this process the ports in use are kept; the start is spread by the process id
 * so that two supervisors (the stack's and a test's) rarely meet.
 */
const SERVICE_PORTS = { first: 24000, count: 8000 };
const servicePorts = new Set<number>();
let nextServicePort = SERVICE_PORTS.first + ((process.pid * 97) % SERVICE_PORTS.count);

async function servicePort(): Promise<number> {
  for (let tries = 0; tries < SERVICE_PORTS.count; tries++) {
    const port = nextServicePort;
    nextServicePort = SERVICE_PORTS.first + ((port - SERVICE_PORTS.first + 1) % SERVICE_PORTS.count);
    if (servicePorts.has(port)) continue;
    const free = await new Promise<boolean>((resolve) => {
      const probe = createServer();
      probe.once('error', () => resolve(false));
      probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
    });
    if (!free) continue;
    servicePorts.add(port);
    return port;
  }
  throw new Error(
    `no free port for a Service in ${SERVICE_PORTS.first}–${SERVICE_PORTS.first + SERVICE_PORTS.count - 1}`,
  );
}

/** Where a Service sends a connection: a ready endpoint. */
export interface Endpoint {
  host: string;
  port: number;
}

/**
 * The engine's own Service of one model: a port on 127.0.0.1 that forwards each connection to `target()` (a ready
 * stand-in, or a real engine's pod) and, while there is none, is not listened on, so a connection is refused.
 */
export class ServicePort {
  private server: Server | undefined;
  private readonly timer: NodeJS.Timeout;
  /** The last error listening on the port, reported once until the port listens again. */
  private failed: string | undefined;

  private constructor(
    readonly port: number,
    private readonly target: () => Endpoint | undefined,
    private readonly onListenError: (err: Error) => void,
  ) {
    this.timer = setInterval(() => void this.follow(), 250);
  }

  /**
   * `onListenError` hears of a port that could not be listened on (taken by another process): the Service refuses
   * connections until it can, as it is tried again every 250 ms.
   */
  static async open(
    target: () => Endpoint | undefined,
    onListenError: (err: Error) => void = () => undefined,
  ): Promise<ServicePort> {
    const service = new ServicePort(await servicePort(), target, onListenError);
    await service.follow();
    return service;
  }

  /**
   * Listens while a target is ready, not while none is. Also called at once when a target goes (before it stops), so
   * that no connection is taken in between: one taken and then closed unanswered is a 502 from HAProxy, not a retry.
   */
  async follow(): Promise<void> {
    const ready = this.target() !== undefined;
    if (ready && !this.server) {
      const server = createServer((client) => {
        const endpoint = this.target();
        if (endpoint === undefined) return client.destroy();
        const engine = createConnection(endpoint.port, endpoint.host);
        client.pipe(engine).pipe(client);
        client.on('error', () => engine.destroy());
        engine.on('error', () => client.destroy());
        client.on('close', () => engine.destroy());
        engine.on('close', () => client.destroy());
      });
      this.server = server;
      await new Promise<void>((resolve) => {
        server.once('error', (err) => {
          this.server = undefined;
          if (this.failed !== err.message) this.onListenError(err);
          this.failed = err.message;
          resolve();
        });
        server.listen(this.port, '127.0.0.1', () => {
          this.failed = undefined;
          resolve();
        });
      });
    } else if (!ready && this.server) {
      // New connections are refused; those open run to their end.
      this.server.close();
      this.server = undefined;
    }
  }

  close(): void {
    clearInterval(this.timer);
    this.server?.close();
    this.server = undefined;
    servicePorts.delete(this.port);
  }
}

/** One front pod's HAProxy on 127.0.0.1. */
export class FrontProxy {
  private constructor(
    private readonly child: ChildProcess,
    private readonly dir: string,
    /** Where clients reach the model through this pod, as through the model's Service. */
    readonly url: string,
    /** The exporter's base URL: `${metricsUrl}/metrics`, `${metricsUrl}/ready`. */
    readonly metricsUrl: string,
  ) {}

  static available(): boolean {
    return existsSync(HAPROXY);
  }

  /**
   * Starts HAProxy with the pod's `config` in front of the Service port `enginePort(<service>)` of each revision;
   * resolves once it is ready.
   */
  static async start(config: string, enginePort: (service: string) => number): Promise<FrontProxy> {
    const [port, metricsPort] = [await freePort(), await freePort()];
    const dir = mkdtempSync(join(tmpdir(), 'ferry-front-'));
    const file = join(dir, 'haproxy.cfg');
    writeFileSync(
      file,
      loopbackFrontConfig(config, {
        bind: `127.0.0.1:${port}`,
        metricsBind: `127.0.0.1:${metricsPort}`,
        engine: (service) => `127.0.0.1:${enginePort(service)}`,
      }),
    );
    const child = spawn(HAPROXY, ['-db', '-f', file], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-2000)));
    const proxy = new FrontProxy(child, dir, `http://127.0.0.1:${port}`, `http://127.0.0.1:${metricsPort}`);
    const deadline = Date.now() + 10_000;
    for (;;) {
      if (child.exitCode !== null) {
        void proxy.stop();
        throw new Error(`haproxy did not start: ${stderr.trim() || `exit ${child.exitCode}`}`);
      }
      const ok = await fetch(`${proxy.metricsUrl}${READY_PATH}`).then(
        (res) => res.ok,
        () => false,
      );
      if (ok) return proxy;
      if (Date.now() > deadline) {
        void proxy.stop();
        throw new Error(`haproxy did not answer ${READY_PATH} within 10 s: ${stderr.trim()}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /**
   * As the kubelet stops a front pod: SIGUSR1, HAProxy's soft stop (the image's STOPSIGNAL), so it stops listening and
   * finishes what it holds; SIGTERM if it is still there after `graceMs` (0: at once, as the local stack stops).
   * Resolves when the process has exited.
   */
  stop(graceMs = 30_000): Promise<void> {
    const exited =
      this.child.exitCode !== null || this.child.signalCode !== null
        ? Promise.resolve()
        : new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.kill(graceMs > 0 ? 'SIGUSR1' : 'SIGTERM');
    const hard = setTimeout(() => this.child.kill('SIGTERM'), graceMs);
    hard.unref();
    rmSync(this.dir, { recursive: true, force: true });
    return exited.finally(() => clearTimeout(hard));
  }
}
