// Activities for workflow tests: every call is recorded, and each test scripts what a call does (return, block until
// released or cancelled, throw a typed failure). Without a script a call succeeds the way the real one would.
import { activityInfo, getClient, heartbeat, sleep } from '@temporalio/activity';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import {
  describeSource,
  type FerryActivities,
  parseServedModel,
  progressSignal,
  type ServedModel,
  type StepProgress,
} from '../../workflows/contract/index.js';
import { probesUpTo } from './baseline.js';

export type ActivityName = keyof FerryActivities;
export type ActivityInput<K extends ActivityName> = Parameters<FerryActivities[K]>[0];
export type ActivityOutput<K extends ActivityName> = Awaited<ReturnType<FerryActivities[K]>>;
export type Behaviour<K extends ActivityName> = (input: ActivityInput<K>, call: StubCall) => Promise<ActivityOutput<K>>;

export interface StubCall {
  name: ActivityName;
  input: unknown;
  outcome?: 'returned' | 'threw' | 'cancelled';
}

/** A call that waits, heartbeating and honouring cancellation, until the test lets it go. */
export class Gate<K extends ActivityName> {
  /** Resolves with the call once the activity has been called. */
  readonly reached: Promise<StubCall>;
  private reach!: (call: StubCall) => void;
  private settled?: { value?: ActivityOutput<K>; error?: Error };

  constructor() {
    this.reached = new Promise((resolve) => (this.reach = resolve));
  }

  /** The call returns `value`, or what an unscripted call returns. */
  release(value?: ActivityOutput<K>): void {
    this.settled = { value };
  }

  /** The call throws `error`. */
  fail(error: Error): void {
    this.settled = { error };
  }

  /** @internal */
  async wait(call: StubCall, fallback: () => Promise<ActivityOutput<K>>): Promise<ActivityOutput<K>> {
    this.reach(call);
    while (!this.settled) await pause();
    if (this.settled.error) throw this.settled.error;
    return this.settled.value ?? (await fallback());
  }
}

/** A non-retryable failure of a named type, as the real activities throw it. */
export function failure(type: string, message = `simulated ${type}`): ApplicationFailure {
  return ApplicationFailure.nonRetryable(message, type);
}

/** A retryable failure of a named type. */
export function transient(type: string, message = `simulated ${type}`): ApplicationFailure {
  return ApplicationFailure.retryable(message, type);
}

// Heartbeats so that a cancellation reaches the activity; `sleep` throws CancelledFailure when it does.
async function pause(): Promise<void> {
  heartbeat();
  await sleep(25);
}

/** Signals the activity's workflow with progress, the way the real long waits do. */
export async function reportProgress(progress: StepProgress): Promise<void> {
  const execution = activityInfo().workflowExecution;
  if (!execution) throw new Error('reportProgress needs an activity of a workflow');
  await getClient().workflow.getHandle(execution.workflowId).signal(progressSignal, progress);
}

/** Waits until the activity is cancelled (the workflow moved on, or the worker shuts down). */
export async function blockUntilCancelled(): Promise<never> {
  for (;;) await pause();
}

/** A stand-in for the sha256 of a source: stable, and different for different sources. */
export function fakeSourceHash(model: ServedModel): string {
  let hash = 0x811c9dc5;
  for (const ch of describeSource(model.spec.source)) hash = Math.imul(hash ^ ch.charCodeAt(0), 0x01000193) >>> 0;
  return hash.toString(16).padStart(8, '0').repeat(8);
}

// Every activity of the contract: the record fails to compile when one is missing or unknown.
const ACTIVITY_NAMES = Object.keys({
  claimName: true,
  applyStorage: true,
  startPuller: true,
  awaitPuller: true,
  releaseVolume: true,
  applyEngine: true,
  awaitRollout: true,
  awaitHealth: true,
  scaleEngine: true,
  readStatus: true,
  shiftTraffic: true,
  retireRevision: true,
  lookAtModel: true,
  tearDown: true,
  fetchAdapters: true,
  syncAdapters: true,
  measureBaseline: true,
  applyAdmission: true,
  checkTenantGrant: true,
  dryRunModel: true,
  clusterCapacity: true,
} satisfies Record<ActivityName, true>) as ActivityName[];

export class StubActivities {
  readonly calls: StubCall[] = [];
  private readonly scripted = new Map<ActivityName, Behaviour<ActivityName>>();
  private readonly queued = new Map<ActivityName, Behaviour<ActivityName>[]>();
  private deploymentGeneration = 0;
  /** The latest spec each model's activities were given: a look carries only a reference. */
  private readonly models = new Map<string, ServedModel>();

  /** What every later call of `name` does. */
  on<K extends ActivityName>(name: K, behaviour: Behaviour<K>): this {
    this.scripted.set(name, behaviour);
    return this;
  }

  /** What the next call of `name` does (several queue up in order); later calls fall back to `on` or the default. */
  once<K extends ActivityName>(name: K, behaviour: Behaviour<K>): this {
    const queue = this.queued.get(name) ?? [];
    queue.push(behaviour);
    this.queued.set(name, queue);
    return this;
  }

  /** The next call of `name` runs `first` (say, reports progress), then waits until the gate is released. */
  gate<K extends ActivityName>(name: K, first?: (input: ActivityInput<K>) => Promise<void>): Gate<K> {
    const gate = new Gate<K>();
    this.once(name, async (input, call): Promise<ActivityOutput<K>> => {
      await first?.(input);
      return await gate.wait(call, () => this.fallback(name, input));
    });
    return gate;
  }

  /** Every later call of `name` for a model named `prefix…` throws what `error` makes; others run as unscripted. */
  failForModels(name: ActivityName, prefix: string, error: () => Error): this {
    return this.on(name, (input) =>
      this.modelOf(input).metadata.name.startsWith(prefix) ? Promise.reject(error()) : this.fallback(name, input),
    );
  }

  /** Every later call of `name` waits until it is cancelled. */
  block(name: ActivityName): this {
    return this.on(name, () => blockUntilCancelled());
  }

  /** The next call of `name` throws `error` (a `failure(...)` or `transient(...)`). */
  throwOnce(name: ActivityName, error: Error): this {
    return this.once(name, () => Promise.reject(error));
  }

  /** Names of the calls so far, in order. */
  names(): ActivityName[] {
    return this.calls.map((c) => c.name);
  }

  callsOf<K extends ActivityName>(name: K): (StubCall & { input: ActivityInput<K> })[] {
    return this.calls.filter((c) => c.name === name) as (StubCall & { input: ActivityInput<K> })[];
  }

  /** The activity object to give a Worker. */
  activities(): FerryActivities {
    return Object.fromEntries(
      ACTIVITY_NAMES.map((name) => [name, (input: unknown) => this.invoke(name, input)]),
    ) as unknown as FerryActivities;
  }

  /** The spec an activity works on: its input's, or for a look the latest one its model's activities were given. */
  modelOf(input: ActivityInput<ActivityName>): ServedModel {
    if ('model' in input) return input.model;
    if ('document' in input) return parseServedModel(input.document);
    if (!('ref' in input)) throw new Error('clusterCapacity reads a cluster, not a model');
    const model = this.models.get(`${input.ref.namespace}/${input.ref.name}`);
    if (!model) throw new Error(`a look at ${input.ref.namespace}/${input.ref.name} before any other activity`);
    return model;
  }

  private async invoke(name: ActivityName, input: unknown): Promise<unknown> {
    const call: StubCall = { name, input };
    if (typeof input === 'object' && input !== null && 'model' in input) {
      const { model } = input as { model: ServedModel };
      this.models.set(`${model.metadata.namespace}/${model.metadata.name}`, model);
    }
    this.calls.push(call);
    const behaviour = this.queued.get(name)?.shift() ?? this.scripted.get(name);
    try {
      const result = behaviour ? await behaviour(input as never, call) : await this.fallback(name, input as never);
      call.outcome = 'returned';
      return result;
    } catch (err) {
      call.outcome = err instanceof CancelledFailure ? 'cancelled' : 'threw';
      throw err;
    }
  }

  /** What the real activity returns when all goes well. */
  fallback<K extends ActivityName>(name: K, input: ActivityInput<K>): Promise<ActivityOutput<K>> {
    const model = this.modelOf(input);
    const { name: modelName, namespace } = model.metadata;
    const results: { [N in ActivityName]: () => ActivityOutput<N> } = {
      claimName: () => ({ rootUid: `uid-${modelName}`, sourceHash: fakeSourceHash(model), resumed: [] }),
      applyStorage: () => ({ pvcName: `${modelName}-weights`, phase: 'Bound', holdsSource: false }),
      startPuller: () => ({ jobName: `${modelName}-pull-${fakeSourceHash(model).slice(0, 8)}` }),
      awaitPuller: () => ({ jobName: (input as { jobName: string }).jobName, durationMs: 1_000 }),
      releaseVolume: () => undefined,
      applyEngine: () => ({ generation: ++this.deploymentGeneration }),
      awaitRollout: () => ({
        generation: (input as { generation: number }).generation,
        readyReplicas: model.spec.replicas,
        updatedReplicas: model.spec.replicas,
      }),
      awaitHealth: () => ({
        endpoint: `http://${modelName}.${namespace}.svc:${model.spec.engine.port}/v1`,
        models: [model.spec.engine.servedModelName],
      }),
      scaleEngine: () => undefined,
      readStatus: () => ({ replicas: model.spec.replicas, readyReplicas: model.spec.replicas }),
      shiftTraffic: () => ({ frontPods: 2 }),
      retireRevision: () => ({ deleted: [] }),
      lookAtModel: () => ({ replicas: model.spec.replicas, readyReplicas: model.spec.replicas, repaired: [] }),
      tearDown: () => {
        const pvc = `PersistentVolumeClaim/${modelName}-weights`;
        const retain = model.spec.storage.retainOnDelete;
        return {
          deleted: [`Deployment/${modelName}`, `Service/${modelName}`, ...(retain ? [] : [pvc])],
          retained: retain ? [pvc] : [],
        };
      },
      fetchAdapters: () => ({ fetched: (model.spec.engine.lora.adapters ?? []).map((a) => a.name), failed: [] }),
      syncAdapters: () => {
        const replicas = model.spec.replicas;
        return {
          adapters: (model.spec.engine.lora.adapters ?? []).map((a) => ({
            name: a.name,
            loadedReplicas: replicas,
            readyReplicas: replicas,
          })),
          unloaded: [],
          incarnations: Array.from({ length: replicas }, (_, i) => `${modelName}-${i}/00000000/0`),
        };
      },
      // A replica that carries 8 requests at once within any goal.
      measureBaseline: () => ({
        maxConcurrency: 8,
        capped: false,
        ttftP95Ms: 100,
        itlP95Ms: 20,
        attainment: 1,
        pod: `${modelName}-0`,
        probes: probesUpTo(8),
        durationMs: 30_000,
      }),
      applyAdmission: () => undefined,
      // The grant allows it: what a worker whose tenants file and cluster say so returns.
      checkTenantGrant: () => undefined,
      // A document the worker accepts, in a cluster with nothing in the way: the objects as built, none refused.
      dryRunModel: () => ({ issues: [], objects: [] }),
      // One GPU node with all of its GPUs free.
      clusterCapacity: () => ({ nodes: [{ name: 'gpu-0', allocatable: 8, free: 8 }] }),
    };
    return Promise.resolve(results[name]());
  }
}
