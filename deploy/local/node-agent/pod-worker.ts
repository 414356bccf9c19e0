// One pod on one of the agent's nodes, from scheduling to deletion, as a kubelet runs it: the pod's network namespace
// and volumes, each container as a process (sandbox.ts), its probes, restarts with the kubelet's back-off, and the
// status a kubelet writes (phase, conditions, container states with exit codes, OOMKilled, termination messages),
// with the kubelet's events. Deleting the pod stops its containers (SIGTERM, SIGKILL after the grace period), then the
// agent removes the pod, as a kubelet does once it has cleaned up.
import { existsSync, mkdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type {
  CoreV1Api,
  V1Container,
  V1ContainerState,
  V1ContainerStateTerminated,
  V1ContainerStatus,
  V1Pod,
  V1PodCondition,
  V1PodStatus,
} from '@kubernetes/client-node';
import { parseQuantity } from '../../../workflows/contract/spec/quantities.js';
import type { ImageRuntime } from './images.js';
import type { PodAddress, PodNetwork } from './network.js';
import { runProbe } from './probes.js';
import { ContainerProcess, removeRunDir, type ContainerExit } from './sandbox.js';
import {
  prepareVolumes,
  refreshConfigVolumes,
  releaseVolumes,
  type Attachments,
  type VolumeContext,
} from './volumes.js';

const BACKOFF_START_S = 10;
const BACKOFF_MAX_S = 300;
/** A container that ran this long without failing starts its back-off anew. */
const BACKOFF_RESET_MS = 10 * 60_000;
const DEFAULT_SHM_BYTES = 64 * 1024 * 1024;
const CONFIG_REFRESH_MS = 5_000;
const MAX_TERMINATION_MESSAGE = 4096;
const FALLBACK_LOG_LINES = 80;
const FALLBACK_LOG_BYTES = 2048;

export interface AgentNode {
  name: string;
  /** Third octet of the node's pod /24. */
  subnet: number;
  hostIp: string;
}

/** What a pod's worker needs from the agent. */
export interface PodHost {
  core: CoreV1Api;
  network: PodNetwork;
  attachments: Attachments;
  images: Record<string, ImageRuntime>;
  podsDir: string;
  volumesDir: string;
  patchStatus(pod: V1Pod, status: V1PodStatus): Promise<void>;
  event(pod: V1Pod, type: 'Normal' | 'Warning', reason: string, message: string, component?: string): void;
  log: (msg: string, extra?: Record<string, unknown>) => void;
  /** The pod is gone from the node: the agent forgets its worker. */
  finished(uid: string): void;
}

interface Run {
  proc: ContainerProcess;
  startedAt: string;
  started: boolean;
  ready: boolean;
  logFile: string;
  /** Set when the agent itself stops the run (a failed liveness or startup probe). */
  killedBy?: string;
}

interface Slot {
  spec: V1Container;
  restartCount: number;
  run?: Run;
  waiting?: { reason: string; message?: string };
  lastTerminated?: V1ContainerStateTerminated;
  /** Ended for good (its restart policy does not restart it). */
  final?: V1ContainerStateTerminated;
  backoffS: number;
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done);
  });

const now = () => new Date().toISOString().replace(/\.\d+Z$/, 'Z');

/** `$(VAR)` references expanded as the kubelet expands them in env values, command and args; `$$` is a `$`. */
function expand(text: string, env: Record<string, string>): string {
  return text.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (all, name?: string) =>
    name === undefined ? '$' : (env[name] ?? all),
  );
}

function lines(text: string): string[] {
  return text.split('\n').filter((l) => l.trim() !== '');
}

/** Image users first, then the host's entries that do not clash with them by name or id. */
function mergeAccounts(image: string[], host: string): string {
  const names = new Set(image.map((l) => l.split(':')[0]));
  const ids = new Set(image.map((l) => l.split(':')[2]));
  const kept = lines(host).filter((l) => !names.has(l.split(':')[0]) && !ids.has(l.split(':')[2]));
  return `${[...image, ...kept].join('\n')}\n`;
}

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
   * `<namespace>/<model>/<pod>` → `http://<pod IP>:<engine port>` for a running engine pod of a Ferry model (what
   * in-cluster Ferry reaches when a request must go to one replica), undefined for other pods.
   */
  engineTarget(): [string, string] | undefined {
    const labels = this.pod.metadata?.labels ?? {};
    const model = labels['ferry.dev/model'];
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
      await Promise.all(this.slots.map((slot) => this.runSlot(slot, volumes)));
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

  // ---------------------------------------------------------------------------------------------------------------
  // Containers

  private async runSlot(slot: Slot, volumes: Map<string, string>): Promise<void> {
    const name = slot.spec.name;
    const image = this.host.images[slot.spec.image ?? ''];
    if (!image || !existsSync(image.requires)) {
      await this.imageMissing(slot, image);
      return;
    }
    while (!this.stopping) {
      const prepared = await this.launchOf(slot, image, volumes);
      if ('reason' in prepared) {
        if (slot.waiting?.message !== prepared.message) {
          this.host.event(this.pod, 'Warning', 'Failed', `Error: ${prepared.message}`);
        }
        slot.waiting = prepared;
        this.writeStatus();
        await sleep(10_000, this.abort.signal);
        continue;
      }
      if (slot.restartCount === 0) {
        this.host.event(
          this.pod,
          'Normal',
          'Pulled',
          `Container image "${slot.spec.image}" already present on machine`,
        );
      }
      const proc = new ContainerProcess(prepared.launch);
      const run: Run = { proc, startedAt: now(), started: false, ready: false, logFile: prepared.launch.logFile };
      slot.run = run;
      slot.waiting = undefined;
      this.host.event(this.pod, 'Normal', 'Created', `Created container: ${name}`);
      this.host.event(this.pod, 'Normal', 'Started', `Started container ${name}`);
      this.writeStatus();
      const probing = this.probe(slot, run);
      const exit = await proc.exited;
      await probing;
      await proc.cleanUp();
      const terminated = this.terminatedState(slot, run, exit, prepared.launch.terminationFile);
      slot.run = undefined;
      if (exit.startError)
        this.host.log('container did not start', { pod: this.key, container: name, error: exit.startError });
      const policy = this.pod.spec?.restartPolicy ?? 'Always';
      if (this.stopping || policy === 'Never' || (policy === 'OnFailure' && terminated.exitCode === 0)) {
        slot.final = terminated;
        this.writeStatus();
        return;
      }
      slot.lastTerminated = terminated;
      const ranMs =
        Date.parse(terminated.finishedAt as unknown as string) - Date.parse(terminated.startedAt as unknown as string);
      if (ranMs > BACKOFF_RESET_MS) slot.backoffS = BACKOFF_START_S;
      const wait = slot.backoffS;
      slot.backoffS = Math.min(BACKOFF_MAX_S, slot.backoffS * 2);
      slot.restartCount++;
      const pod = this.pod.metadata!;
      slot.waiting = {
        reason: 'CrashLoopBackOff',
        message: `back-off ${wait}s restarting failed container=${name} pod=${pod.name}_${pod.namespace}(${this.uid})`,
      };
      this.host.event(
        this.pod,
        'Warning',
        'BackOff',
        `Back-off restarting failed container ${name} in pod ${pod.name}_${pod.namespace}(${this.uid})`,
      );
      this.writeStatus();
      await sleep(wait * 1000, this.abort.signal);
    }
  }

  /** An image with no local runtime: the pull fails, then backs off, for as long as the pod lives. */
  private async imageMissing(slot: Slot, image: ImageRuntime | undefined): Promise<void> {
    const ref = slot.spec.image ?? '';
    const why = image
      ? `the local runtime for it is not installed (${image.install} installs it)`
      : `not found: the local node agent has no runtime for this image (deploy/local/node-agent/images.ts)`;
    slot.waiting = {
      reason: 'ErrImagePull',
      message: `rpc error: code = NotFound desc = failed to pull and unpack image "${ref}": ${why}`,
    };
    this.host.event(this.pod, 'Normal', 'Pulling', `Pulling image "${ref}"`);
    this.host.event(this.pod, 'Warning', 'Failed', `Failed to pull image "${ref}": ${slot.waiting.message}`);
    this.host.event(this.pod, 'Warning', 'Failed', 'Error: ErrImagePull');
    this.writeStatus();
    await sleep(2_000, this.abort.signal);
    if (this.stopping) return;
    slot.waiting = { reason: 'ImagePullBackOff', message: `Back-off pulling image "${ref}"` };
    this.host.event(this.pod, 'Normal', 'BackOff', `Back-off pulling image "${ref}"`);
    this.host.event(this.pod, 'Warning', 'Failed', 'Error: ImagePullBackOff');
    this.writeStatus();
    await new Promise<void>((resolve) => this.abort.signal.addEventListener('abort', () => resolve()));
  }

  private terminatedState(
    slot: Slot,
    run: Run,
    exit: ContainerExit,
    terminationFile: string,
  ): V1ContainerStateTerminated {
    let message = '';
    try {
      message = readFileSync(terminationFile, 'utf8').slice(0, MAX_TERMINATION_MESSAGE);
    } catch {
      // none written
    }
    if (!message && exit.exitCode !== 0 && slot.spec.terminationMessagePolicy === 'FallbackToLogsOnError') {
      const log = existsSync(run.logFile) ? readFileSync(run.logFile, 'utf8') : '';
      message = log
        .split('\n')
        .slice(-FALLBACK_LOG_LINES - 1)
        .join('\n')
        .slice(-FALLBACK_LOG_BYTES);
    }
    const reason = exit.oomKilled
      ? 'OOMKilled'
      : exit.exitCode === 0
        ? 'Completed'
        : exit.startError
          ? 'StartError'
          : 'Error';
    return {
      exitCode: exit.exitCode,
      reason,
      ...(message ? { message } : exit.startError ? { message: exit.startError } : {}),
      startedAt: run.startedAt as unknown as Date,
      finishedAt: now() as unknown as Date,
      containerID: this.containerId(slot),
    };
  }

  private containerId(slot: Slot): string {
    return `ferry-node-agent://${this.uid.slice(0, 12)}-${slot.spec.name}-${slot.restartCount}`;
  }

  /** The launch of one run, or why it cannot start (CreateContainerConfigError). */
  private async launchOf(
    slot: Slot,
    image: ImageRuntime,
    volumes: Map<string, string>,
  ): Promise<{ launch: ConstructorParameters<typeof ContainerProcess>[0] } | { reason: string; message: string }> {
    const spec = slot.spec;
    const podSc = this.pod.spec?.securityContext ?? {};
    const sc = spec.securityContext ?? {};
    const uid = sc.runAsUser ?? podSc.runAsUser ?? image.user.uid;
    const gid = sc.runAsGroup ?? podSc.runAsGroup ?? image.user.gid;
    if ((sc.runAsNonRoot ?? podSc.runAsNonRoot) && uid === 0) {
      return {
        reason: 'CreateContainerConfigError',
        message: `container has runAsNonRoot and image will run as root (pod: "${this.pod.metadata!.name}_${this.pod.metadata!.namespace}(${this.uid})", container: ${spec.name})`,
      };
    }
    const resolved = await this.envOf(spec, image);
    if (!('env' in resolved)) return resolved;
    const env = resolved.env;
    const passwd = mergeAccounts(image.passwd, readFileSync('/etc/passwd', 'utf8'));
    const group = mergeAccounts(image.group, readFileSync('/etc/group', 'utf8'));
    const home =
      lines(passwd)
        .find((l) => l.split(':')[2] === String(uid))
        ?.split(':')[5] || '/';
    if (!env.HOME) env.HOME = home;
    const mounts = [];
    for (const m of spec.volumeMounts ?? []) {
      const source = volumes.get(m.name);
      if (!source)
        return { reason: 'CreateContainerConfigError', message: `volume "${m.name}" is not a volume of the pod` };
      mounts.push({
        source: m.subPath ? join(source, m.subPath) : source,
        target: m.mountPath,
        readOnly: m.readOnly === true,
      });
    }
    const limits = spec.resources?.limits ?? {};
    const memory = limits.memory ? parseQuantity(String(limits.memory)) : undefined;
    const cpu = limits.cpu ? parseQuantity(String(limits.cpu)) : undefined;
    const command = (spec.command?.length ? spec.command : image.entrypoint).map((a) => expand(a, env));
    const args = (spec.command?.length ? (spec.args ?? []) : (spec.args ?? image.cmd)).map((a) => expand(a, env));
    const logDir = join(this.dir, 'logs', spec.name);
    mkdirSync(logDir, { recursive: true });
    const fsGroup = podSc.fsGroup;
    const groups = [...new Set([...(fsGroup !== undefined ? [fsGroup] : []), ...(podSc.supplementalGroups ?? [])])];
    return {
      launch: {
        id: `${this.uid.slice(0, 12)}-${spec.name}`,
        dir: join(this.dir, 'containers', spec.name),
        netns: this.address!.namespace,
        argv: [...command, ...args],
        env,
        workingDir: spec.workingDir || image.workingDir,
        uid,
        gid,
        groups,
        noNewPrivs: sc.allowPrivilegeEscalation === false,
        home,
        passwd,
        group,
        hostname: this.pod.spec?.hostname ?? this.pod.metadata!.name!,
        hosts: `127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n${this.address!.ip}\t${this.pod.metadata!.name}\n`,
        runtimeBinds: image.binds,
        mounts,
        shmBytes: DEFAULT_SHM_BYTES,
        ...(memory !== undefined ? { memoryLimitBytes: Math.floor(memory) } : {}),
        ...(cpu !== undefined ? { cpuLimitMillis: Math.ceil(cpu * 1000) } : {}),
        logFile: join(logDir, `${slot.restartCount}.log`),
        terminationFile: join(logDir, `${slot.restartCount}.termination`),
        terminationMessagePath: spec.terminationMessagePath || '/dev/termination-log',
      },
    };
  }

  /** The container's environment: the image's, then envFrom, then env, with the kubelet's errors for missing keys. */
  private async envOf(
    spec: V1Container,
    image: ImageRuntime,
  ): Promise<{ env: Record<string, string> } | { reason: string; message: string }> {
    const namespace = this.pod.metadata!.namespace!;
    const env: Record<string, string> = { ...image.env, HOSTNAME: this.pod.metadata!.name! };
    const core = this.host.core;
    const read = async (kind: 'Secret' | 'ConfigMap', name: string) => {
      if (kind === 'Secret') {
        const s = await core.readNamespacedSecret({ name, namespace });
        return Object.fromEntries(
          Object.entries(s.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]),
        );
      }
      return (await core.readNamespacedConfigMap({ name, namespace })).data ?? {};
    };
    const missing = (kind: string, name: string) => ({
      reason: 'CreateContainerConfigError',
      message: `${kind.toLowerCase()} "${name}" not found`,
    });
    for (const from of spec.envFrom ?? []) {
      const ref = from.secretRef ?? from.configMapRef;
      const kind = from.secretRef ? 'Secret' : 'ConfigMap';
      const data = await read(kind, ref!.name!).catch(() => undefined);
      if (!data) {
        if (ref!.optional) continue;
        return missing(kind, ref!.name!);
      }
      for (const [k, v] of Object.entries(data)) env[`${from.prefix ?? ''}${k}`] = v;
    }
    for (const variable of spec.env ?? []) {
      const from = variable.valueFrom;
      if (!from) {
        env[variable.name] = expand(variable.value ?? '', env);
        continue;
      }
      const keyRef = from.secretKeyRef ?? from.configMapKeyRef;
      if (keyRef) {
        const kind = from.secretKeyRef ? 'Secret' : 'ConfigMap';
        const data = await read(kind, keyRef.name!).catch(() => undefined);
        const value = data?.[keyRef.key];
        if (value === undefined) {
          if (keyRef.optional) continue;
          if (!data) return missing(kind, keyRef.name!);
          return {
            reason: 'CreateContainerConfigError',
            message: `couldn't find key ${keyRef.key} in ${kind} ${namespace}/${keyRef.name}`,
          };
        }
        env[variable.name] = value;
      } else if (from.fieldRef) {
        const path = from.fieldRef.fieldPath;
        const m = this.pod.metadata!;
        const fields: Record<string, string | undefined> = {
          'metadata.name': m.name,
          'metadata.namespace': m.namespace,
          'metadata.uid': m.uid,
          'spec.nodeName': this.node.name,
          'spec.serviceAccountName': this.pod.spec?.serviceAccountName,
          'status.podIP': this.address?.ip,
          'status.hostIP': this.node.hostIp,
        };
        const label = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(path);
        env[variable.name] = label
          ? ((label[1] === 'labels' ? m.labels : m.annotations)?.[label[2]!] ?? '')
          : (fields[path] ?? '');
      } else {
        env[variable.name] = '';
      }
    }
    return { env };
  }

  /** The container's startup, readiness and liveness probes for one run. */
  private async probe(slot: Slot, run: Run): Promise<void> {
    const { startupProbe, readinessProbe, livenessProbe } = slot.spec;
    const ip = this.address!.ip;
    const alive = () => !this.stopping && slot.run === run && !run.killedBy;
    let ended = false;
    void run.proc.exited.then(() => (ended = true));
    const live = () => alive() && !ended;
    const every = async (
      probe: NonNullable<typeof startupProbe>,
      kind: string,
      onResult: (ok: boolean, message?: string) => boolean,
    ) => {
      await sleep((probe.initialDelaySeconds ?? 0) * 1000, this.abort.signal);
      while (live()) {
        const result = await runProbe(probe, slot.spec, ip);
        if (!live()) return;
        if (!result.ok)
          this.host.event(this.pod, 'Warning', 'Unhealthy', `${kind} probe failed: ${result.message ?? ''}`);
        if (onResult(result.ok, result.message)) return;
        await Promise.race([sleep((probe.periodSeconds ?? 10) * 1000, this.abort.signal), run.proc.exited]);
      }
    };
    const kill = (why: string) => {
      run.killedBy = why;
      this.host.event(this.pod, 'Normal', 'Killing', `Container ${slot.spec.name} ${why}, will be restarted`);
      void run.proc.stop((this.pod.spec?.terminationGracePeriodSeconds ?? 30) * 1000);
    };
    if (startupProbe) {
      let failures = 0;
      await every(startupProbe, 'Startup', (ok) => {
        if (ok) return (run.started = true);
        if (++failures >= (startupProbe.failureThreshold ?? 3)) {
          kill('failed startup probe');
          return true;
        }
        return false;
      });
    } else {
      run.started = true;
    }
    if (!run.started || !live()) return;
    this.writeStatus();
    const readiness = readinessProbe
      ? (() => {
          let failures = 0;
          let successes = 0;
          return every(readinessProbe, 'Readiness', (ok) => {
            if (ok) {
              failures = 0;
              if (++successes >= (readinessProbe.successThreshold ?? 1) && !run.ready) {
                run.ready = true;
                this.writeStatus();
              }
            } else {
              successes = 0;
              if (++failures >= (readinessProbe.failureThreshold ?? 3) && run.ready) {
                run.ready = false;
                this.writeStatus();
              }
            }
            return false;
          });
        })()
      : Promise.resolve().then(() => {
          run.ready = true;
          this.writeStatus();
        });
    const liveness = livenessProbe
      ? (() => {
          let failures = 0;
          return every(livenessProbe, 'Liveness', (ok) => {
            failures = ok ? 0 : failures + 1;
            if (failures >= (livenessProbe.failureThreshold ?? 3)) {
              kill('failed liveness probe');
              return true;
            }
            return false;
          });
        })()
      : Promise.resolve();
    await Promise.all([readiness, liveness]);
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Status

  private containerStatus(slot: Slot): V1ContainerStatus {
    let state: V1ContainerState;
    if (slot.run) state = { running: { startedAt: slot.run.startedAt as unknown as Date } };
    else if (slot.final) state = { terminated: slot.final };
    else state = { waiting: slot.waiting ?? { reason: 'ContainerCreating' } };
    return {
      name: slot.spec.name,
      image: slot.spec.image ?? '',
      imageID: slot.run || slot.final || slot.lastTerminated ? `ferry-node-agent://${slot.spec.image}` : '',
      ...(slot.run || slot.final ? { containerID: this.containerId(slot) } : {}),
      ready: slot.run?.ready === true,
      started: slot.run?.started === true,
      restartCount: slot.restartCount,
      state,
      lastState: slot.lastTerminated ? { terminated: slot.lastTerminated } : {},
    };
  }

  private status(): V1PodStatus {
    const statuses = this.slots.map((s) => this.containerStatus(s));
    const allFinal = this.slots.every((s) => s.final);
    const phase = allFinal
      ? this.slots.every((s) => s.final!.exitCode === 0)
        ? 'Succeeded'
        : 'Failed'
      : this.slots.some((s) => s.run || s.lastTerminated || s.final)
        ? 'Running'
        : 'Pending';
    const ready = !allFinal && statuses.every((s) => s.ready);
    const t = now() as unknown as Date;
    const previous = new Map((this.pod.status?.conditions ?? []).map((c) => [c.type, c]));
    const condition = (type: string, ok: boolean, reason?: string): V1PodCondition => {
      const before = previous.get(type);
      const status = ok ? 'True' : 'False';
      return {
        type,
        status,
        lastProbeTime: null as unknown as Date,
        lastTransitionTime: before && before.status === status ? before.lastTransitionTime : t,
        ...(!ok && reason ? { reason } : {}),
      };
    };
    const notReady = allFinal ? 'PodCompleted' : 'ContainersNotReady';
    const conditions: V1PodCondition[] = [
      condition('PodReadyToStartContainers', this.address !== undefined && !this.sandboxReleased),
      condition('Initialized', true),
      condition('Ready', ready, notReady),
      condition('ContainersReady', ready, notReady),
      ...(previous.get('PodScheduled') ? [previous.get('PodScheduled')!] : []),
    ];
    return {
      phase,
      conditions,
      hostIP: this.node.hostIp,
      hostIPs: [{ ip: this.node.hostIp }],
      ...(this.address ? { podIP: this.address.ip, podIPs: [{ ip: this.address.ip }] } : {}),
      startTime: this.startTime as unknown as Date,
      containerStatuses: statuses,
    };
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
        await this.host.patchStatus(this.pod, this.status()).catch((err: unknown) => {
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
