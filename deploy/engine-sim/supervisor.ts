// Local runs only: gives every simulated engine pod (a KWOK pod that runs nothing) an engine stand-in on 127.0.0.1,
// started with the pod's own vLLM arguments and API key, and writes the per-model endpoint overrides that the
// worker's `override` endpoint mode reads: `{ "<namespace>/<model>": "http://127.0.0.1:<port>" }`, pointing at the
// stand-in of the model's newest running pod (the current revision), and `"<namespace>/<model>/<pod>"` for each pod's
// own stand-in (what a request to one replica reaches). A stand-in stops when its pod goes away, and with it whatever
// it held in memory (LoRA adapters), as a real engine's process would.
import { renameSync, writeFileSync } from 'node:fs';
import type { CoreV1Api, V1Pod } from '@kubernetes/client-node';
import { parseEngineArgs } from './args.js';
import { createEngineSim, type EngineSim } from './server.js';

const ENGINE_SELECTOR = 'app.kubernetes.io/managed-by=ferry,app.kubernetes.io/component=engine';
/** Label a model may carry to set how long its stand-ins "load" (seconds; default 3). */
const LOAD_DELAY_LABEL = 'sim.ferry.dev/load-delay-seconds';

interface Running {
  sim: EngineSim;
  url: string;
  model: string;
  namespace: string;
  pod: string;
  createdAt: number;
}

export const log = (msg: string, extra: Record<string, unknown> = {}) =>
  process.stderr.write(
    `${JSON.stringify({ time: new Date().toISOString(), component: 'engine-sim-supervisor', msg, ...extra })}\n`,
  );

export class EngineSimSupervisor {
  private readonly sims = new Map<string, Running>();
  private readonly starting = new Set<string>();
  private lastWritten = '';

  constructor(
    private readonly core: CoreV1Api,
    private readonly overridesFile: string,
    /** A directory standing for every model's volume at `/models` (tests); unset, LoRA paths are not checked. */
    private readonly options: { modelsDir?: string } = {},
  ) {}

  /** One pass: start stand-ins for new running pods, stop those of pods that are gone, rewrite the overrides. */
  async sync(): Promise<void> {
    const pods = (await this.core.listPodForAllNamespaces({ labelSelector: ENGINE_SELECTOR })).items;
    const live = new Map<string, V1Pod>();
    for (const pod of pods) {
      if (pod.status?.phase === 'Running' && !pod.metadata?.deletionTimestamp) live.set(pod.metadata!.uid!, pod);
    }
    for (const [uid, running] of this.sims) {
      if (!live.has(uid)) {
        this.sims.delete(uid);
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
    this.writeOverrides();
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
      model: labels['ferry.dev/model'] ?? labels['app.kubernetes.io/instance'] ?? pod.metadata!.name!,
      namespace: pod.metadata!.namespace!,
      pod: pod.metadata!.name!,
      createdAt: new Date(pod.metadata?.creationTimestamp ?? 0).getTime(),
    };
    this.sims.set(uid, running);
    log('stand-in started', {
      pod: `${running.namespace}/${pod.metadata?.name}`,
      url: running.url,
      loadDelaySeconds: loadDelay,
    });
  }

  /** The current URL map: `<namespace>/<model>` → its newest running pod's, `<namespace>/<model>/<pod>` → that pod's. */
  overrides(): Record<string, string> {
    const newest = new Map<string, Running>();
    const entries: [string, string][] = [];
    for (const r of this.sims.values()) {
      const key = `${r.namespace}/${r.model}`;
      const seen = newest.get(key);
      if (!seen || r.createdAt > seen.createdAt) newest.set(key, r);
      entries.push([`${key}/${r.pod}`, r.url]);
    }
    entries.push(...[...newest].map(([k, r]): [string, string] => [k, r.url]));
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
    await Promise.all([...this.sims.values()].map((r) => r.sim.stop().catch(() => undefined)));
    this.sims.clear();
    this.writeOverrides();
  }
}
