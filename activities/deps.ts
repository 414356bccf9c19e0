// What the activities need from the outside world; the worker wires real ones, tests wire what they need.
import type { Cluster } from './cluster/api.js';
import type { ProgressSink } from './cluster/progress.js';
import {
  modelRefOf,
  webUiLinkFor,
  workflowIdFor,
  type ModelRef,
  type ServedModel,
  type Slot,
} from '../workflows/contract/index.js';
import type { ModelWatcher } from './cluster/model-watcher.js';
import type { ChildOptions, NetworkPolicyPeer } from './builders/index.js';

/** A model's spec at `generation`, for a look that carries only a reference (the worker asks the workflow). */
export type SpecSource = (ref: ModelRef, generation: number) => Promise<ServedModel>;

/** One engine pod, for a request that must reach that replica and no other (a LoRA adapter loaded on each). */
export interface EnginePod {
  name: string;
  /** `status.podIP`; unset until the pod has one. */
  ip?: string;
}

/**
 * What finding a model's engine needs of it: its name, namespace, vLLM's port, and whether it has a front (its
 * Service then points at the front, and the engine has a Service of its own). A ServedModel is one.
 */
export interface EngineAddress {
  metadata: { name: string; namespace: string };
  spec: { engine: { port: number }; front?: unknown };
  /** The engine of the revision in this slot (docs/design/rollout.md, section 2); unset: `a`. */
  slot?: Slot;
}

/** The model's own Service's URL, as clients reach it: the engine's, or with `spec.front` the front's. */
export async function clientEndpoint(resolve: EndpointResolver, model: EngineAddress): Promise<string> {
  const { front: _front, ...spec } = model.spec;
  return await resolve({ metadata: model.metadata, spec });
}

/**
 * Where Ferry sends HTTP requests to a model's engine: through its Service (health checks, the CLI's completion) — with
 * a front, the engine's own Service, never through the front, which would hold them while no replica answers — or,
 * given `pod`, to that pod's engine alone.
 */
export type EndpointResolver = (model: EngineAddress, pod?: EnginePod) => Promise<string>;

export interface ActivityDeps {
  cluster: Cluster;
  /** HTTP client for engine requests; `fetch` by default. */
  http?: typeof fetch;
  /** Resolves a model's engine URL: in-cluster DNS (or a pod's IP), the API server's proxy, or an override. */
  endpoints: EndpointResolver;
  /** Set when engines are reached only through the API server's proxy: nothing may put load on them that way. */
  proxiedEngines?: boolean;
  /** Delivers progress to the workflow (the worker signals it); unset means heartbeats only. */
  progress?: ProgressSink;
  /** Where a look gets the spec; unset, `lookAtModel` cannot run. */
  specs?: SpecSource;
  /** The worker's watch: looks read from its memory, and a claim starts watching the model's namespace. */
  watcher?: ModelWatcher;
  /** The Temporal Web UI (base URL, Temporal namespace): the root ConfigMap then links the model's workflow page. */
  webUi?: { url: string; namespace: string };
  /**
   * Why a tenant's grant does not allow `model` now (one line), or undefined when it does: the worker's tenants file
   * (docs/security.md), and the labels of the Secrets and PVCs it allows by label. Unset, the worker has none: a look
   * repairs every model, and `checkTenantGrant` refuses every tenant.
   */
  grants?: (tenant: string, model: ServedModel) => Promise<string | undefined>;
  /**
   * Set when the worker runs with FERRY_NETWORK_POLICY=on (docs/design/network-policy.md): each model gets a
   * NetworkPolicy that admits only these pods, the worker's, to vLLM's own port, and every engine pod the gate.
   */
  networkPolicy?: NetworkPolicyPeer;
  /** Poll and back-off intervals, shrunk by tests. */
  timing?: Partial<ActivityTiming>;
}

export interface ActivityTiming {
  /** How often a wait re-reads state that no watch covers (events, HTTP health). */
  pollMs: number;
  /** How long claimName waits for a PVC that someone else is deleting before it gives up. */
  terminatingPvcWaitMs: number;
  /** Minimum interval between two progress signals with the same state. */
  progressIntervalMs: number;
  /** How long applyStorage waits for a Pending PVC to bind before it returns (and reports why it is pending). */
  volumeBindGraceMs: number;
  /** How long a step waits for objects it deleted, or found being deleted, to be gone (pods of a released Job). */
  deletionWaitMs: number;
}

const DEFAULT_TIMING: ActivityTiming = {
  pollMs: 2_000,
  terminatingPvcWaitMs: 120_000,
  progressIntervalMs: 5_000,
  volumeBindGraceMs: 10_000,
  deletionWaitMs: 300_000,
};

/** What the builders need of a model's children: its root's uid, and the worker's network policy setting. */
export const childOptions = (deps: ActivityDeps, rootUid: string): ChildOptions => ({
  rootUid,
  ...(deps.networkPolicy ? { networkPolicy: deps.networkPolicy } : {}),
});

/** The model's workflow page in the Web UI, when the worker knows the Web UI. */
export const webUiLinkOf = (deps: ActivityDeps, model: ServedModel): string | undefined =>
  deps.webUi ? webUiLinkFor(deps.webUi.url, deps.webUi.namespace, workflowIdFor(modelRefOf(model))) : undefined;

export const timingOf = (deps: ActivityDeps): ActivityTiming => ({ ...DEFAULT_TIMING, ...deps.timing });
