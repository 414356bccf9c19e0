// The local stack's kubelet for its real-engine nodes: registers the nodes (tainted, so only pods that ask for them
// land there), keeps them Ready with a Lease, runs each pod bound to them (pod-worker.ts), serves container logs to the
// API server (kubelet-server.ts), stands in for kube-proxy for their Services (service-proxy.ts), and writes the
// endpoint overrides the local worker reads for the models it serves: `<namespace>/<model>` → the Service's proxy,
// `<namespace>/<model>/<pod>` → that pod's IP and engine port. Ferry's own code knows none of this: it reads only what
// Kubernetes holds, and reaches engines through the overrides as it does the stand-ins'.
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Server } from 'node:https';
import {
  CoordinationV1Api,
  CoreV1Api,
  DiscoveryV1Api,
  type KubeConfig,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
  Watch,
  type KubernetesObject,
  type V1Pod,
  type V1PodStatus,
} from '@kubernetes/client-node';
import type { ImageRuntime } from './images.js';
import { startKubeletServer } from './kubelet-server.js';
import { PodNetwork } from './network.js';
import type { AgentNode } from './pod-context.js';
import { PodWorker } from './pod-worker.js';
import { removeLeftoverCgroups } from './sandbox.js';
import { ServiceProxies } from './service-proxy.js';
import { Attachments } from './volumes.js';

const FIELD_MANAGER = 'ferry-node-agent';
/** Label and taint of the agent's nodes: a pod must tolerate the taint (and may select the label) to land there. */
const NODE_LABEL = 'local.ferry.dev/node-agent';
const LEASE_SECONDS = 40;
const HEARTBEAT_MS = 10_000;

export interface AgentSettings {
  kc: KubeConfig;
  nodes: AgentNode[];
  /** Capacity each node reports (the machine's cores and memory are shared by all of them). */
  capacity: Record<string, string>;
  kubernetesVersion: string;
  zones: string[];
  stateDir: string;
  overridesFile: string;
  images: Record<string, ImageRuntime>;
  network: { bridge: string; gateway: string; prefix: number };
  kubelet: { port: number; cert: string; key: string; ca: string };
  log: (msg: string, extra?: Record<string, unknown>) => void;
}

export class NodeAgent {
  private readonly core: CoreV1Api;
  private readonly objects: KubernetesObjectApi;
  private readonly leases: CoordinationV1Api;
  private readonly network: PodNetwork;
  private readonly attachments = new Attachments();
  private readonly workers = new Map<string, PodWorker>();
  private readonly proxies: ServiceProxies;
  private server?: Server;
  private timers: NodeJS.Timeout[] = [];
  private watches: AbortController[] = [];
  private lastOverrides = '';
  private stopping = false;

  constructor(private readonly settings: AgentSettings) {
    this.core = settings.kc.makeApiClient(CoreV1Api);
    this.objects = settings.kc.makeApiClient(KubernetesObjectApi);
    this.leases = settings.kc.makeApiClient(CoordinationV1Api);
    this.network = new PodNetwork(settings.network);
    const base = settings.network.gateway.split('.').slice(0, 2).join('.');
    this.proxies = new ServiceProxies(settings.kc.makeApiClient(DiscoveryV1Api), (ip) => ip.startsWith(`${base}.`));
  }

  private get podsDir(): string {
    return join(this.settings.stateDir, 'pods');
  }

  async start(): Promise<void> {
    const { log } = this.settings;
    mkdirSync(this.podsDir, { recursive: true });
    mkdirSync(join(this.settings.stateDir, 'volumes'), { recursive: true });
    await this.network.ensureBridge();
    const leftovers = await this.network.removeLeftovers();
    const killed = removeLeftoverCgroups();
    if (leftovers.length || killed)
      log('removed what an earlier run left', { netns: leftovers.length, processes: killed });
    this.server = await startKubeletServer({
      host: this.settings.network.gateway,
      ...this.settings.kubelet,
      logs: (ns, pod, container, previous) => {
        const worker = [...this.workers.values()].find((w) => w.key === `${ns}/${pod}`);
        return worker ? (worker.logFile(container, previous) ?? undefined) : null;
      },
    });
    for (const [i, node] of this.settings.nodes.entries())
      await this.registerNode(node, this.settings.zones[i % this.settings.zones.length]!);
    await this.heartbeat();
    this.timers.push(setInterval(() => void this.heartbeat(), HEARTBEAT_MS));
    for (const node of this.settings.nodes) this.watchPods(node);
    this.timers.push(setInterval(() => void this.syncAll(), 2_000));
    this.writeOverrides();
    log('node agent ready', { nodes: this.settings.nodes.map((n) => n.name), overrides: this.settings.overridesFile });
  }

  private async registerNode(node: AgentNode, zone: string): Promise<void> {
    const capacity = this.settings.capacity;
    const obj: KubernetesObject = {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: {
        name: node.name,
        labels: {
          'kubernetes.io/hostname': node.name,
          'kubernetes.io/os': 'linux',
          'kubernetes.io/arch': 'amd64',
          'topology.kubernetes.io/region': 'us-east-1',
          'topology.kubernetes.io/zone': zone,
          [NODE_LABEL]: 'true',
        },
      },
      // @ts-expect-error Node spec fields live at the top level of the object.
      spec: { taints: [{ key: NODE_LABEL, value: 'true', effect: 'NoSchedule' }] },
    };
    await this.objects.patch(obj, undefined, undefined, FIELD_MANAGER, true, PatchStrategy.ServerSideApply);
    const status: Record<string, unknown> = {
      capacity,
      allocatable: capacity,
      addresses: [
        { type: 'InternalIP', address: node.hostIp },
        { type: 'Hostname', address: node.name },
      ],
      daemonEndpoints: { kubeletEndpoint: { Port: this.settings.kubelet.port } },
      nodeInfo: {
        architecture: 'amd64',
        operatingSystem: 'linux',
        kubeletVersion: this.settings.kubernetesVersion,
        kubeProxyVersion: this.settings.kubernetesVersion,
        containerRuntimeVersion: 'ferry-node-agent://1',
        kernelVersion: '',
        osImage: 'the local machine (processes, not containers)',
        bootID: '',
        machineID: '',
        systemUUID: '',
      },
    };
    await this.core.patchNodeStatus(
      { name: node.name, body: { status } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }

  /** The nodes' Leases and Ready condition: without them the node controller marks them NotReady and evicts. */
  private async heartbeat(): Promise<void> {
    const t = new Date();
    for (const node of this.settings.nodes) {
      const lease = {
        metadata: { name: node.name, namespace: 'kube-node-lease' },
        spec: { holderIdentity: node.name, leaseDurationSeconds: LEASE_SECONDS, renewTime: t },
      };
      try {
        await this.leases.replaceNamespacedLease({ name: node.name, namespace: 'kube-node-lease', body: lease });
      } catch {
        await this.leases.createNamespacedLease({ namespace: 'kube-node-lease', body: lease }).catch(() => undefined);
      }
      const iso = t.toISOString().replace(/\.\d+Z$/, 'Z');
      const ok = (type: string, status: string, reason: string, message: string) => ({
        type,
        status,
        reason,
        message,
        lastHeartbeatTime: iso,
        lastTransitionTime: iso,
      });
      await this.core
        .patchNodeStatus(
          {
            name: node.name,
            body: {
              status: {
                conditions: [
                  ok('Ready', 'True', 'KubeletReady', 'the local node agent is running pods'),
                  ok('MemoryPressure', 'False', 'KubeletHasSufficientMemory', ''),
                  ok('DiskPressure', 'False', 'KubeletHasNoDiskPressure', ''),
                  ok('PIDPressure', 'False', 'KubeletHasSufficientPID', ''),
                ],
              },
            },
          },
          setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
        )
        .catch((err: unknown) => this.settings.log('node status not written', { node: node.name, error: String(err) }));
    }
  }

  private watchPods(node: AgentNode): void {
    const controller = new AbortController();
    this.watches.push(controller);
    const watch = new Watch(this.settings.kc);
    const start = () => {
      if (this.stopping) return;
      void watch
        .watch(
          '/api/v1/pods',
          { fieldSelector: `spec.nodeName=${node.name}` },
          (type: string, pod: V1Pod) => {
            if (type === 'DELETED') this.workers.get(pod.metadata!.uid!)?.vanished();
            else this.onPod(pod, node);
          },
          () => setTimeout(start, 1_000),
        )
        .then((req) => controller.signal.addEventListener('abort', () => req.abort()))
        .catch(() => setTimeout(start, 1_000));
    };
    start();
  }

  private onPod(pod: V1Pod, node: AgentNode): void {
    const uid = pod.metadata!.uid!;
    const worker = this.workers.get(uid);
    if (worker) {
      worker.update(pod);
      return;
    }
    if (this.stopping || pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed') {
      // A finished pod from before the agent's restart: nothing to run. Deleted ones are removed for the kubelet.
      if (pod.metadata?.deletionTimestamp) {
        void this.core
          .deleteNamespacedPod({ name: pod.metadata.name!, namespace: pod.metadata.namespace!, gracePeriodSeconds: 0 })
          .catch(() => undefined);
      }
      return;
    }
    this.settings.log('pod bound', { pod: `${pod.metadata?.namespace}/${pod.metadata?.name}`, node: node.name });
    this.workers.set(
      uid,
      new PodWorker(pod, node, {
        core: this.core,
        network: this.network,
        attachments: this.attachments,
        images: this.settings.images,
        podsDir: this.podsDir,
        volumesDir: join(this.settings.stateDir, 'volumes'),
        patchStatus: (p, status) => this.patchStatus(p, status),
        event: (p, type, reason, message, component) => this.event(p, node, type, reason, message, component),
        log: this.settings.log,
        finished: (id) => {
          this.workers.delete(id);
          this.writeOverrides();
        },
      }),
    );
    if (pod.metadata?.deletionTimestamp) this.workers.get(uid)!.update(pod);
  }

  /** Pods the watch may have missed (a cut watch), and the Services' endpoints. */
  private async syncAll(): Promise<void> {
    if (this.stopping) return;
    try {
      for (const node of this.settings.nodes) {
        const pods = (await this.core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${node.name}` })).items;
        const seen = new Set(pods.map((p) => p.metadata!.uid!));
        for (const pod of pods) this.onPod(pod, node);
        for (const [uid, worker] of this.workers) {
          if (!seen.has(uid) && worker.nodeName === node.name) worker.vanished();
        }
      }
      await this.proxies.sync();
    } catch (err) {
      this.settings.log('sync failed', { error: String(err) });
    }
    this.writeOverrides();
  }

  private async patchStatus(pod: V1Pod, status: V1PodStatus): Promise<void> {
    await this.core.patchNamespacedPodStatus(
      { name: pod.metadata!.name!, namespace: pod.metadata!.namespace!, body: { status } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }

  private readonly recentEvents = new Map<string, number>();

  private event(
    pod: V1Pod,
    node: AgentNode,
    type: 'Normal' | 'Warning',
    reason: string,
    message: string,
    component = 'kubelet',
  ): void {
    const key = `${pod.metadata!.uid}/${reason}/${message}`;
    const last = this.recentEvents.get(key) ?? 0;
    if (Date.now() - last < 30_000) return;
    this.recentEvents.set(key, Date.now());
    const t = new Date();
    void this.core
      .createNamespacedEvent({
        namespace: pod.metadata!.namespace!,
        body: {
          metadata: {
            name: `${pod.metadata!.name}.${t.getTime().toString(16)}${Math.random().toString(16).slice(2, 6)}`,
            namespace: pod.metadata!.namespace!,
          },
          involvedObject: {
            apiVersion: 'v1',
            kind: 'Pod',
            name: pod.metadata!.name,
            namespace: pod.metadata!.namespace,
            uid: pod.metadata!.uid,
          },
          reason,
          message,
          type,
          source: { component, ...(component === 'kubelet' ? { host: node.name } : {}) },
          firstTimestamp: t,
          lastTimestamp: t,
          count: 1,
          reportingComponent: component,
          reportingInstance: component === 'kubelet' ? node.name : '',
        },
      })
      .catch(() => undefined);
  }

  /** The override map for the worker: each Service's proxy, and each running pod's engine address. */
  overrides(): Record<string, string> {
    const entries: [string, string][] = Object.entries(this.proxies.overrides());
    for (const worker of this.workers.values()) {
      const target = worker.engineTarget();
      if (target) entries.push(target);
    }
    return Object.fromEntries(entries.sort(([a], [b]) => a.localeCompare(b)));
  }

  private writeOverrides(): void {
    const text = `${JSON.stringify(this.overrides(), null, 2)}\n`;
    if (text === this.lastOverrides) return;
    const tmp = `${this.settings.overridesFile}.tmp`;
    writeFileSync(tmp, text);
    renameSync(tmp, this.settings.overridesFile);
    this.lastOverrides = text;
  }

  /** Memory (bytes) of every container the agent runs, by pod and container (for benchmarks). */
  containers(): { pod: string; ids: string[] }[] {
    return [...this.workers.values()].map((w) => ({ pod: w.key, ids: w.containerIds() }));
  }

  async stop(): Promise<void> {
    this.stopping = true;
    for (const t of this.timers) clearInterval(t);
    for (const w of this.watches) w.abort();
    await Promise.all([...this.workers.values()].map((w) => w.shutdown(5_000)));
    this.proxies.close();
    this.server?.close();
    this.lastOverrides = '';
    writeFileSync(this.settings.overridesFile, '{}\n');
  }
}
