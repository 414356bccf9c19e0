// Local runs only: gives every simulated engine pod (a KWOK pod that runs nothing) an engine stand-in on 127.0.0.1,
// started with the pod's own vLLM arguments and API key, and writes the per-model endpoint overrides that the
// worker's `override` endpoint mode reads: `{ "<namespace>/<model>": "http://127.0.0.1:<port>" }`, pointing at the
// stand-in of the model's newest running pod (the current revision), and `"<namespace>/<model>/<pod>"` for each pod's
// own stand-in (what a request to one replica reaches). A stand-in stops when its pod goes away, and with it whatever
// it held in memory (LoRA adapters), as a real engine's process would. A pod with the admission sidecar gets Debian's
// nginx in front of its stand-in (admission-proxy.ts), and the model's URL, which stands for the Service, points at it.
// A model with a front (spec.front) gets each front pod played by Debian's HAProxy with the pod's own configuration
// (front-proxy.ts): then the model's URL is a port of its own that stands for its Service (to a front pod while there is
// one, else to the engine, so that it does not change when the front comes or goes), `<namespace>/<model>-engine` (the
// engine's own Service) the newest stand-in's, and `<namespace>/<model>/<front pod>` that pod's exporter (what the
// autoscaler reads).
import { renameSync, writeFileSync } from 'node:fs';
import type { CoreV1Api, DiscoveryV1Api, V1Pod } from '@kubernetes/client-node';
import { admissionConfigOf, AdmissionProxy, NGINX } from './admission-proxy.js';
import { FrontProxy, HAPROXY, ServicePort, type Endpoint } from './front-proxy.js';
import { parseEngineArgs } from './args.js';
import { FRONT_FINALIZER, hold, log, preStopPauseMs, release, releaseStrays, stopGraceMs } from './front-pods.js';
import type { RunningFront } from './front-pods.js';
import { createEngineSim, type EngineSim } from './server.js';

const ENGINE_SELECTOR = 'app.kubernetes.io/managed-by=ferry,app.kubernetes.io/component=engine';
const FRONT_SELECTOR = 'app.kubernetes.io/managed-by=ferry,app.kubernetes.io/component=front';
/** The annotation by which KWOK manages a node (deploy/local/up.sh: `--manage-nodes-with-annotation-selector`). */
const KWOK_NODE = 'kwok.x-k8s.io/node';
/** Label a model may carry to set how long its stand-ins "load" (seconds; default 3). */
const LOAD_DELAY_LABEL = 'sim.ferry.dev/load-delay-seconds';

interface Running {
  sim: EngineSim;
  url: string;
  /** The pod's admission sidecar, played by a local nginx in front of the stand-in; `config` names its ConfigMap. */
  admission?: { proxy: AdmissionProxy; config: string };
  model: string;
  namespace: string;
  pod: string;
  createdAt: number;
}

export { log };

export class EngineSimSupervisor {
  private readonly sims = new Map<string, Running>();
  private readonly starting = new Set<string>();
  private readonly fronts = new Map<string, RunningFront>();
  /**
   * Front pods being deleted, by uid: in their preStop pause (`timer`), then finishing what they hold; each let go in
   * the API when its HAProxy has exited. Stopped at once when the stack stops.
   */
  private readonly stopping = new Map<string, { front: RunningFront; timer?: NodeJS.Timeout }>();
  /** Each fronted model's engine Service, `<namespace>/<model>` → its port. */
  private readonly engineServices = new Map<string, ServicePort>();
  /**
   * The model's Service for a model with a front (or that had one while its stand-ins run): a port of its own that
   * stays while the Service does, whichever pods it selects — the front's, or the engine's once the front is removed —
   * so that the model's URL does not change, as a Service's address does not.
   */
  private readonly modelServices = new Map<string, ServicePort>();
  /** Models with a front now: their engine Service `<model>-engine` exists, or a front pod is played. */
  private fronted = new Set<string>();
  /** Fronted models whose engine runs for real → a ready endpoint of their engine Service. */
  private realEndpoints = new Map<string, Endpoint>();
  /** KWOK's nodes, as of the last pass: their pods run nothing. */
  private kwokNodes = new Set<string>();
  private lastWritten = '';
  private get finalizer(): string {
    return this.options.finalizer ?? FRONT_FINALIZER;
  }

  constructor(
    private readonly core: CoreV1Api,
    private readonly overridesFile: string,
    private readonly options: {
      /** A directory standing for every model's volume at `/models` (tests); unset, LoRA paths are not checked. */
      modelsDir?: string;
      /**
       * Reads the engine Services' EndpointSlices: a fronted model whose engine runs for real (a vLLM under the node
       * agent, `--engine vllm`) is reached at a ready endpoint of its engine Service, as kube-proxy would reach it.
       */
      discovery?: DiscoveryV1Api;
      /** The finalizer that holds the front pods it plays (deploy/engine-sim/front-pods.ts); a test's own. */
      finalizer?: string;
      /** Plays the pods of this namespace only (a test's, beside the local stack's supervisor); unset, of all. */
      namespace?: string;
    } = {},
  ) {}

  /**
   * The running pods `selector` selects on KWOK's nodes, by uid: those that run nothing. A pod on the node agent's
   * nodes (`--engine vllm`) runs for real, and gets no stand-in. `listed`: every pod it selects.
   */
  private async simulatedPods(selector: string): Promise<{ live: Map<string, V1Pod>; listed: V1Pod[] }> {
    const [pods, nodes] = await Promise.all([
      this.options.namespace
        ? this.core.listNamespacedPod({ namespace: this.options.namespace, labelSelector: selector })
        : this.core.listPodForAllNamespaces({ labelSelector: selector }),
      this.core.listNode(),
    ]);
    const kwok = new Set(
      nodes.items.filter((n) => n.metadata?.annotations?.[KWOK_NODE] === 'fake').map((n) => n.metadata!.name!),
    );
    this.kwokNodes = kwok;
    const live = new Map<string, V1Pod>();
    for (const pod of pods.items) {
      const running = pod.status?.phase === 'Running' && !pod.metadata?.deletionTimestamp;
      if (running && kwok.has(pod.spec?.nodeName ?? '')) live.set(pod.metadata!.uid!, pod);
    }
    return { live, listed: pods.items };
  }

  /** One pass: start stand-ins for new running pods, stop those of pods that are gone, rewrite the overrides. */
  async sync(): Promise<void> {
    const { live } = await this.simulatedPods(ENGINE_SELECTOR);
    for (const [uid, running] of this.sims) {
      if (!live.has(uid)) {
        this.sims.delete(uid);
        await this.followServices(`${running.namespace}/${running.model}`);
        running.admission?.proxy.stop();
        await running.sim.stop().catch(() => undefined);
        log('stand-in stopped', { model: `${running.namespace}/${running.model}`, url: running.url });
      }
    }
    for (const [uid, pod] of live) {
      if (!this.sims.has(uid) && !this.starting.has(uid)) {
        this.starting.add(uid);
        try {
          await this.start(uid, pod);
        } catch (err) {
          log('stand-in not started', { pod: `${pod.metadata?.namespace}/${pod.metadata?.name}`, error: String(err) });
        } finally {
          this.starting.delete(uid);
        }
      }
    }
    await Promise.all([...this.sims.values()].map((running) => this.followLimit(running)));
    await this.syncFronts();
    await this.syncModelServices();
    this.writeOverrides();
  }

  /**
   * A stable port for each model with a front (its engine Service `<model>-engine` exists, or a front pod is played),
   * kept while it has one, a stand-in or its own Service, as a Service keeps its address; closed when it has none.
   */
  private async syncModelServices(): Promise<void> {
    const labelSelector = 'app.kubernetes.io/managed-by=ferry,app.kubernetes.io/component=service';
    const { namespace } = this.options;
    const services = await (namespace
      ? this.core.listNamespacedService({ namespace, labelSelector })
      : this.core.listServiceForAllNamespaces({ labelSelector }));
    const fronted = new Set([...this.fronts.values()].map((f) => `${f.namespace}/${f.model}`));
    const kept = new Set<string>();
    for (const service of services.items) {
      const model = service.metadata?.labels?.['ferry.dev/model'];
      if (!model || service.metadata?.deletionTimestamp) continue;
      const key = `${service.metadata?.namespace}/${model}`;
      if (service.metadata?.name === `${model}-engine`) fronted.add(key);
      if (service.metadata?.name === model) kept.add(key);
    }
    this.fronted = fronted;
    for (const key of fronted) {
      if (!this.modelServices.has(key))
        this.modelServices.set(key, await ServicePort.open(() => this.modelTarget(key), this.listenError(key)));
    }
    const served = new Set([...this.sims.values()].map((r) => `${r.namespace}/${r.model}`));
    for (const [key, service] of this.modelServices) {
      if (fronted.has(key) || served.has(key) || kept.has(key)) continue;
      service.close();
      this.modelServices.delete(key);
    }
  }

  /** Reports a Service port the supervisor could not listen on: its Service refuses connections meanwhile. */
  private listenError(service: string): (err: Error) => void {
    return (err) => log('service port not listening', { service, error: err.message });
  }

  /** The model's Service ports stop taking connections to a target that has just gone, before it stops. */
  private async followServices(key: string): Promise<void> {
    await this.engineServices.get(key)?.follow();
    await this.modelServices.get(key)?.follow();
  }

  /** Where the model's Service sends a connection: a front pod while it has any, else its newest stand-in. */
  private modelTarget(key: string): Endpoint | undefined {
    const front = [...this.fronts.values()]
      .filter((f) => `${f.namespace}/${f.model}` === key)
      .sort((a, b) => a.pod.localeCompare(b.pod))[0];
    const engine = this.newest().get(key);
    const url = front?.proxy.url ?? (engine && (engine.admission?.proxy.url ?? engine.url));
    return url === undefined ? undefined : { host: '127.0.0.1', port: Number(new URL(url).port) };
  }

  /** Each model's stand-in of its newest running pod (the current revision). */
  private newest(): Map<string, Running> {
    const newest = new Map<string, Running>();
    for (const r of this.sims.values()) {
      const key = `${r.namespace}/${r.model}`;
      const seen = newest.get(key);
      if (!seen || r.createdAt > seen.createdAt) newest.set(key, r);
    }
    return newest;
  }

  /** Front pods: HAProxy for each new running one, stopped for each gone; a model's Service port while it has any. */
  private async syncFronts(): Promise<void> {
    const { live, listed } = await this.simulatedPods(FRONT_SELECTOR);
    // New pods first: KWOK has a pod Ready before its HAProxy runs, so the old one may be deleted already; stopping it
    // first would leave the model's Service without a front in between, refusing connections.
    for (const [uid, pod] of live) {
      if (this.fronts.has(uid)) continue;
      if (!FrontProxy.available()) {
        log(`the model has a front, but ${HAPROXY} is missing: nothing plays it`, { pod: pod.metadata?.name });
        continue;
      }
      try {
        await this.startFront(uid, pod);
      } catch (err) {
        log('front not started', { pod: `${pod.metadata?.namespace}/${pod.metadata?.name}`, error: String(err) });
      }
    }
    for (const [uid, front] of this.fronts) {
      if (live.has(uid)) continue;
      this.fronts.delete(uid);
      await this.followServices(`${front.namespace}/${front.model}`);
      // As the kubelet runs the preStop pause before the stop signal: a connection handed it just before still lands.
      const entry: { front: RunningFront; timer?: NodeJS.Timeout } = { front };
      this.stopping.set(uid, entry);
      entry.timer = setTimeout(() => {
        entry.timer = undefined;
        void front.proxy.stop(front.graceMs).then(async () => {
          log('front stopped', { pod: `${front.namespace}/${front.pod}` });
          await release(this.core, front.namespace, front.pod, this.finalizer);
          this.stopping.delete(uid);
        });
      }, front.preStopMs);
    }
    const playing = new Set([...this.fronts.keys(), ...this.stopping.keys()]);
    await releaseStrays(this.core, listed, playing, this.finalizer);
    const fronted = new Set([...this.fronts.values()].map((f) => `${f.namespace}/${f.model}`));
    for (const [key, service] of this.engineServices) {
      if (fronted.has(key) || fronted.has(key.replace(/-b$/, ''))) continue;
      service.close();
      this.engineServices.delete(key);
    }
    await this.followRealEngines(fronted);
  }

  /**
   * For each fronted model whose engine runs for real (its pods on a node that is not KWOK's): a ready endpoint of its
   * engine Service, `<model>-engine`, and of a rollout's second slot's, `<model>-b`, from their EndpointSlices, which
   * the real controller keeps from the pods' probes.
   */
  private async followRealEngines(fronted: Set<string>): Promise<void> {
    const endpoints = new Map<string, Endpoint>();
    for (const key of this.options.discovery ? fronted : []) {
      const [namespace, model] = key.split('/') as [string, string];
      // The first slot's engine Service, and a rollout's second slot's (`<model>-b`, keyed by that name).
      for (const [service, as] of [
        [`${model}-engine`, key],
        [`${model}-b`, `${key}-b`],
      ] as const) {
        const slices = await this.options.discovery!.listNamespacedEndpointSlice({
          namespace,
          labelSelector: `kubernetes.io/service-name=${service}`,
        });
        for (const slice of slices.items) {
          const port = slice.ports?.find((p) => p.name === 'http')?.port ?? slice.ports?.[0]?.port;
          const ready = (slice.endpoints ?? []).find(
            (e) => e.conditions?.ready === true && !this.kwokNodes.has(e.nodeName ?? ''),
          );
          if (port && ready?.addresses[0]) endpoints.set(as, { host: ready.addresses[0], port });
        }
      }
    }
    this.realEndpoints = endpoints;
  }

  private async startFront(uid: string, pod: V1Pod): Promise<void> {
    const namespace = pod.metadata!.namespace!;
    const model = pod.metadata?.labels?.['ferry.dev/model'] ?? pod.metadata!.name!;
    const configMap = pod.spec?.volumes?.find((v) => v.configMap)?.configMap?.name;
    if (!configMap) throw new Error('the front pod mounts no ConfigMap');
    const data = (await this.core.readNamespacedConfigMap({ name: configMap, namespace })).data ?? {};
    const config = Object.values(data)[0];
    if (!config) throw new Error(`ConfigMap ${configMap} holds no configuration`);
    const key = `${namespace}/${model}`;
    let service = this.engineServices.get(key);
    if (!service) {
      service = await ServicePort.open(() => this.readyEndpoint(namespace, model), this.listenError(`${key}-engine`));
      this.engineServices.set(key, service);
    }
    // A revision in the model's second slot (a rollout) has its own engine Service, `<model>-b`.
    const slotB = `${namespace}/${model}-b`;
    if (config.includes(` ${model}-b.${namespace}.svc:`) && !this.engineServices.has(slotB)) {
      this.engineServices.set(
        slotB,
        await ServicePort.open(() => this.readyEndpoint(namespace, `${model}-b`), this.listenError(slotB)),
      );
    }
    const ports = new Map([
      [`${model}-engine`, service.port],
      [`${model}-b`, this.engineServices.get(slotB)?.port],
    ]);
    const proxy = await FrontProxy.start(config, (name) => {
      const port = ports.get(name);
      if (port === undefined)
        throw new Error(`the front of ${key} sends to Service ${name}, which the local stack does not play`);
      return port;
    });
    const name = pod.metadata!.name!;
    this.fronts.set(uid, {
      uid,
      proxy,
      model,
      namespace,
      pod: name,
      preStopMs: preStopPauseMs(pod),
      graceMs: stopGraceMs(pod),
    });
    await hold(this.core, pod, this.finalizer);
    log('front started', { pod: `${namespace}/${name}`, url: proxy.url, metrics: proxy.metricsUrl });
  }

  /**
   * Where the model's engine Service sends a connection: a ready stand-in (through admission when the pod has it), or
   * a real engine's ready pod.
   */
  private readyEndpoint(namespace: string, model: string): Endpoint | undefined {
    const ready = [...this.sims.values()].find(
      (r) => r.namespace === namespace && r.model === model && r.sim.state.phase === 'ready',
    );
    if (!ready) return this.realEndpoints.get(`${namespace}/${model}`);
    return { host: '127.0.0.1', port: Number(new URL(ready.admission?.proxy.url ?? ready.url).port) };
  }

  /** A new limit in the pod's admission ConfigMap reaches its nginx, as the kubelet and the sidecar bring it. */
  private async followLimit(running: Running): Promise<void> {
    if (!running.admission) return;
    const limit = await this.limitOf(running.namespace, running.admission.config).catch(
      () => running.admission!.proxy.limit,
    );
    try {
      running.admission.proxy.setLimit(limit);
    } catch (err) {
      log('admission limit not applied', { pod: `${running.namespace}/${running.pod}`, error: String(err) });
    }
  }

  /** `max-concurrency` of the ConfigMap (absent: no limit yet). */
  private async limitOf(namespace: string, name: string): Promise<number | undefined> {
    const config = await this.core.readNamespacedConfigMap({ name, namespace });
    const text = config.data?.['max-concurrency'];
    return text === undefined ? undefined : Number(text);
  }

  private async start(uid: string, pod: V1Pod): Promise<void> {
    const container = pod.spec?.containers.find((c) => c.name === 'vllm') ?? pod.spec?.containers[0];
    const env: Record<string, string> = {};
    for (const e of container?.env ?? []) {
      if (e.value !== undefined) env[e.name] = e.value;
      else if (e.valueFrom?.secretKeyRef && e.name === 'VLLM_API_KEY') {
        const ref = e.valueFrom.secretKeyRef;
        const secret = await this.core.readNamespacedSecret({ name: ref.name!, namespace: pod.metadata!.namespace! });
        const data = secret.data?.[ref.key];
        if (data) env[e.name] = Buffer.from(data, 'base64').toString('utf8');
      }
    }
    const loadDelay = Number(pod.metadata?.labels?.[LOAD_DELAY_LABEL] ?? '3');
    const parsed = parseEngineArgs(container?.args ?? [], env);
    const sim = createEngineSim({
      ...parsed.options,
      host: '127.0.0.1',
      port: 0,
      loadDelaySeconds: Number.isFinite(loadDelay) ? loadDelay : 3,
      ...(this.options.modelsDir ? { modelsDir: this.options.modelsDir } : {}),
    });
    const { port } = await sim.start();
    const labels = pod.metadata?.labels ?? {};
    const running: Running = {
      sim,
      url: `http://127.0.0.1:${port}`,
      // The instance: the model's name, or `<model>-b` for a revision in the model's second slot (a rollout).
      model: labels['app.kubernetes.io/instance'] ?? labels['ferry.dev/model'] ?? pod.metadata!.name!,
      namespace: pod.metadata!.namespace!,
      pod: pod.metadata!.name!,
      createdAt: new Date(pod.metadata?.creationTimestamp ?? 0).getTime(),
    };
    const config = admissionConfigOf(pod);
    if (config && AdmissionProxy.available()) {
      const limit = await this.limitOf(running.namespace, config).catch(() => undefined);
      running.admission = { proxy: await AdmissionProxy.start(port, limit), config };
      log('admission started', { pod: `${running.namespace}/${running.pod}`, url: running.admission.proxy.url, limit });
    } else if (config) {
      log(`the pod has an admission sidecar, but ${NGINX} is missing: clients reach the stand-in unlimited`, {
        pod: `${running.namespace}/${running.pod}`,
      });
    }
    this.sims.set(uid, running);
    log('stand-in started', {
      pod: `${running.namespace}/${pod.metadata?.name}`,
      url: running.url,
      loadDelaySeconds: loadDelay,
    });
  }

  /** The current URL map: `<namespace>/<model>` → its newest running pod's, `<namespace>/<model>/<pod>` → that pod's. */
  overrides(): Record<string, string> {
    const entries: [string, string][] = [];
    for (const r of this.sims.values()) entries.push([`${r.namespace}/${r.model}/${r.pod}`, r.url]);
    for (const f of this.fronts.values()) entries.push([`${f.namespace}/${f.model}/${f.pod}`, f.proxy.metricsUrl]);
    // The model's URL stands for its Service, which reaches the engine through admission; a pod's, for the pod's IP
    // and the engine's own port. A model with a front has its Service on a port of its own (front or engine behind
    // it), and the engine's own Service is `<model>-engine`.
    for (const [k, r] of this.newest()) {
      const url = r.admission?.proxy.url ?? r.url;
      if (this.fronted.has(k)) entries.push([`${k}-engine`, url]);
      if (!this.modelServices.has(k)) entries.push([k, url]);
    }
    for (const [k, service] of this.modelServices) entries.push([k, `http://127.0.0.1:${service.port}`]);
    return Object.fromEntries(entries.sort(([a], [b]) => a.localeCompare(b)));
  }

  private writeOverrides(): void {
    const text = `${JSON.stringify(this.overrides(), null, 2)}\n`;
    if (text === this.lastWritten) return;
    const tmp = `${this.overridesFile}.tmp`;
    writeFileSync(tmp, text);
    renameSync(tmp, this.overridesFile);
    this.lastWritten = text;
  }

  async stop(): Promise<void> {
    const fronts = [...this.fronts.values(), ...[...this.stopping.values()].map((s) => s.front)];
    for (const { timer } of this.stopping.values()) clearTimeout(timer);
    this.stopping.clear();
    // Killed at once, and let go in the API, so that no front pod waits for a supervisor that is gone.
    await Promise.all(
      fronts.map((f) => f.proxy.stop(0).then(() => release(this.core, f.namespace, f.pod, this.finalizer))),
    );
    for (const service of [...this.engineServices.values(), ...this.modelServices.values()]) service.close();
    this.fronts.clear();
    this.engineServices.clear();
    this.modelServices.clear();
    for (const r of this.sims.values()) r.admission?.proxy.stop();
    await Promise.all([...this.sims.values()].map((r) => r.sim.stop().catch(() => undefined)));
    this.sims.clear();
    this.writeOverrides();
  }
}
