// One pod on one of the agent's nodes, from scheduling to deletion, as a kubelet runs it: the pod's network namespace
// and volumes, each container as a process (container-run.ts, sandbox.ts), its probes, restarts with the kubelet's
// back-off, and the status a kubelet writes (pod-status.ts: phase, conditions, container states with exit codes,
// OOMKilled, termination messages), with the kubelet's events. Deleting the pod stops its containers (SIGTERM, SIGKILL
// after the grace period), then the agent removes the pod, as a kubelet does once it has cleaned up.
import { existsSync, mkdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { BACKOFF_START_S, runSlot } from './container-run.js';
import type { PodAddress } from './network.js';
import { now, sleep, type AgentNode, type PodContext, type PodHost, type Slot } from './pod-context.js';
import { podStatus } from './pod-status.js';
import { removeRunDir } from './sandbox.js';
import { prepareVolumes, refreshConfigVolumes, releaseVolumes, type VolumeContext } from './volumes.js';

const CONFIG_REFRESH_MS = 5_000;

export class PodWorker {
  private pod: V1Pod;
  private readonly uid: string;
  private readonly dir: string;
  private readonly slots: Slot[];
  private address?: PodAddress;
  private readonly abort = new AbortController();
  private stopping = false;
  private terminal = false;
  private startTime = now();
  private readyToStart = false;
  private statusDirty = false;
  /** Set while the agent shuts down: no status is written. */
  private silent = false;
  private statusWriting = false;
  private readonly done: Promise<void>;
  private volumeCtx?: VolumeContext;
  private readonly ctx: PodContext;

  constructor(
    pod: V1Pod,
    private readonly node: AgentNode,
    private readonly host: PodHost,
  ) {
    this.pod = pod;
    this.uid = pod.metadata!.uid!;
    if (pod.status?.startTime) this.startTime = new Date(pod.status.startTime).toISOString().replace(/\.\d+Z$/, 'Z');
    this.dir = join(host.podsDir, `${pod.metadata!.namespace}_${pod.metadata!.name}_${this.uid}`);
    // A pod the agent ran before its restart: its containers ran, so they start again as restarted ones.
    const before = new Map((pod.status?.containerStatuses ?? []).map((s) => [s.name, s]));
    this.slots = (pod.spec?.containers ?? []).map((spec) => {
      const seen = before.get(spec.name);
      const ran = seen?.state?.running !== undefined || seen?.state?.terminated !== undefined;
      return { spec, restartCount: (seen?.restartCount ?? 0) + (ran ? 1 : 0), backoffS: BACKOFF_START_S };
    });
    this.ctx = {
      uid: this.uid,
      dir: this.dir,
      node,
      host,
      signal: this.abort.signal,
      pod: () => this.pod,
      address: () => this.address,
      stopping: () => this.stopping,
      key: () => this.key,
      writeStatus: () => this.writeStatus(),
    };
    this.done = this.live().catch((err: unknown) =>
      host.log('pod worker failed', { pod: this.key, error: String(err) }),
    );
  }

  get key(): string {
    return `${this.pod.metadata!.namespace}/${this.pod.metadata!.name}`;
  }

  get ip(): string | undefined {
    return this.address?.ip;
  }

  /** A newer version of the pod from the API server (its deletion, say). */
  update(pod: V1Pod): void {
    this.pod = pod;
    if (pod.metadata?.deletionTimestamp) this.beginStop();
  }

  /** The pod is gone from the API server (deleted with no grace): stop at once. */
  vanished(): void {
    this.pod = { ...this.pod, metadata: { ...this.pod.metadata, deletionGracePeriodSeconds: 0 } };
    this.beginStop();
  }

  /** The log file of a container's current run, or (`previous`) of its run before. */
  logFile(container: string, previous: boolean): string | undefined {
    const slot = this.slots.find((s) => s.spec.name === container);
    if (!slot) return undefined;
    const count = previous ? slot.restartCount - 1 : slot.restartCount;
    if (count < 0) return undefined;
    const file = join(this.dir, 'logs', container, `${count}.log`);
    return existsSync(file) ? file : undefined;
  }

  get nodeName(): string {
    return this.node.name;
  }

  /**
   * `<namespace>/<instance>/<pod>` → `http://<pod IP>:<engine port>` for a running engine pod of a Ferry model (what
   * in-cluster Ferry reaches when a request must go to one replica), undefined for other pods. The instance is the
   * model's name, or `<model>-b` for a pod of a rollout's second slot, as the worker names a pod of that slot.
   */
  engineTarget(): [string, string] | undefined {
    const labels = this.pod.metadata?.labels ?? {};
    const model = labels['ferry.dev/model'] && (labels['app.kubernetes.io/instance'] ?? labels['ferry.dev/model']);
    const engine = this.pod.spec?.containers.find((c) => c.name === 'vllm');
    const port = engine?.ports?.[0]?.containerPort;
    if (!model || labels['app.kubernetes.io/component'] !== 'engine' || !port || !this.address || this.stopping) {
      return undefined;
    }
    return [`${this.pod.metadata!.namespace}/${model}/${this.pod.metadata!.name}`, `http://${this.address.ip}:${port}`];
  }

  /** Every container's memory cgroup id, for measuring. */
  containerIds(): string[] {
    return this.slots.map((s) => `${this.uid.slice(0, 12)}-${s.spec.name}`);
  }

  /**
   * The agent is shutting down: stop the containers, write nothing more and delete nothing. The pod stays as the API
   * server has it; the agent's next start runs its containers again, counting a restart, as after a node's reboot.
   */
  async shutdown(graceMs: number): Promise<void> {
    this.silent = true;
    this.stopping = true;
    this.abort.abort();
    const running = this.slots.flatMap((s) => (s.run ? [s.run.proc] : []));
    await Promise.all(running.map((proc) => proc.stop(graceMs)));
    await this.done;
  }

  /** Deletion: every running container gets SIGTERM, and SIGKILL once the pod's grace period is over. */
  private beginStop(): void {
    if (this.stopping) return;
    this.stopping = true;
    this.abort.abort();
    const meta = this.pod.metadata;
    const graceS = meta?.deletionGracePeriodSeconds ?? this.pod.spec?.terminationGracePeriodSeconds ?? 30;
    for (const slot of this.slots) {
      if (!slot.run) continue;
      this.host.event(this.pod, 'Normal', 'Killing', `Stopping container ${slot.spec.name}`);
      void slot.run.proc.stop(graceS * 1000);
    }
  }

  private async live(): Promise<void> {
    mkdirSync(join(this.dir, 'logs'), { recursive: true });
    this.writeStatus();
    try {
      this.address = await this.host.network.create(this.uid, this.node.subnet);
    } catch (err) {
      this.host.event(this.pod, 'Warning', 'FailedCreatePodSandBox', `Failed to create pod sandbox: ${String(err)}`);
      await sleep(5_000, this.abort.signal);
      if (!this.stopping) return this.live();
    }
    this.writeStatus();
    const volumes = await this.waitForVolumes();
    if (volumes) {
      this.readyToStart = true;
      this.writeStatus();
      const refresher = this.refreshConfig();
      await Promise.all(this.slots.map((slot) => runSlot(this.ctx, slot, volumes)));
      this.terminal = this.slots.every((s) => s.final);
      this.writeStatus();
      if (this.terminal && !this.stopping) {
        // A finished pod's volumes are detached (the attach/detach controller ignores terminated pods) and its
        // sandbox removed; the pod object stays until someone deletes it.
        await this.releaseSandbox();
        await new Promise<void>((resolve) => this.abort.signal.addEventListener('abort', () => resolve()));
      }
      await refresher;
    }
    await this.releaseSandbox();
    rmSync(join(this.dir, 'volumes'), { recursive: true, force: true });
    if (existsSync(this.dir)) removeRunDir(this.dir);
    if (this.pod.metadata?.deletionTimestamp && !this.silent) {
      await this.host.core
        .deleteNamespacedPod({
          name: this.pod.metadata.name!,
          namespace: this.pod.metadata.namespace!,
          gracePeriodSeconds: 0,
          body: { gracePeriodSeconds: 0, preconditions: { uid: this.uid } },
        })
        .catch(() => undefined);
    }
    this.host.finished(this.uid);
  }

  private sandboxReleased = false;

  private async releaseSandbox(): Promise<void> {
    if (this.sandboxReleased) return;
    this.sandboxReleased = true;
    await releaseVolumes({ pod: this.pod, podDir: this.dir });
    this.host.attachments.detach(this.uid);
    if (this.address) await this.host.network.remove(this.address);
  }

  private async waitForVolumes(): Promise<Map<string, string> | undefined> {
    let last = '';
    while (!this.stopping) {
      this.volumeCtx = {
        core: this.host.core,
        pod: this.pod,
        node: this.node.name,
        volumesDir: this.host.volumesDir,
        podDir: this.dir,
        attachments: this.host.attachments,
      };
      const prepared = await prepareVolumes(this.volumeCtx).catch((err: unknown) => ({
        problem: { reason: 'FailedMount', message: String(err), component: 'kubelet' },
      }));
      if ('paths' in prepared) return prepared.paths;
      const { reason, message, component } = prepared.problem;
      if (`${reason}${message}` !== last) this.host.event(this.pod, 'Warning', reason, message, component);
      last = `${reason}${message}`;
      await sleep(2_000, this.abort.signal);
    }
    return undefined;
  }

  private async refreshConfig(): Promise<void> {
    while (!this.stopping && !this.terminal) {
      await sleep(CONFIG_REFRESH_MS, this.abort.signal);
      if (this.stopping || !this.volumeCtx) break;
      await refreshConfigVolumes({ ...this.volumeCtx, pod: this.pod }).catch(() => undefined);
    }
  }

  /** Writes the status soon; writes never overlap, and the last one carries the newest state. */
  private writeStatus(): void {
    if (this.silent) return;
    this.statusDirty = true;
    if (this.statusWriting) return;
    this.statusWriting = true;
    void (async () => {
      while (this.statusDirty) {
        this.statusDirty = false;
        await this.host
          .patchStatus(this.pod, podStatus(this.ctx, this.slots, this.sandboxReleased, this.startTime))
          .catch((err: unknown) => {
            if ((err as { code?: number }).code !== 404)
              this.host.log('status not written', { pod: this.key, error: String(err) });
          });
      }
      this.statusWriting = false;
    })();
  }

  /** Whether a pod worker's directory is still there (tests). */
  exists(): boolean {
    return existsSync(this.dir) && statSync(this.dir).isDirectory();
  }

  wait(): Promise<void> {
    return this.done;
  }

  /** True until the pod has started any container: readyToStart, for the agent's own accounting. */
  get started(): boolean {
    return this.readyToStart;
  }
}
