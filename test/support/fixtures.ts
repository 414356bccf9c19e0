// What a test file sets up once and tears down at its end, as one call at the top of the file. Each `use*` registers
// its own beforeAll/afterAll and returns an object that those hooks fill in, so tests read it only once they run.
// Vitest runs after-hooks in reverse (`sequence.hooks: 'stack'`): a file's own afterAll, registered later, runs before
// the namespace it used is deleted.
import { randomBytes } from 'node:crypto';
import type { V1Node, V1Toleration } from '@kubernetes/client-node';
import { afterAll, beforeAll } from 'vitest';
import { simulatedNode } from '../../deploy/local/simulated-node.js';
import { Cluster } from '../../activities/cluster/api.js';
import { createActivities } from '../../activities/create-activities.js';
import type { ActivityDeps, ActivityTiming } from '../../activities/deps.js';
import type { FerryActivities } from '../../workflows/contract/index.js';
import { testDeps } from './activity-env.js';
import { startWorkerProcess, terminateModelsOf, type WorkerLaunch, type WorkerProcess } from './e2e.js';
import { startFerryWorker, type FerryTestWorker } from './ferry-worker.js';
import { adminKubeConfig, clientsFor, createNamespace, deleteNamespace, waitFor, type Clients } from './kube.js';
import type { StubActivities } from './stub-activities.js';
import { startHarness, type WorkflowHarness } from './workflow-harness.js';

/** Namespace labels that make Pod Security admission enforce "restricted" there. */
export const RESTRICTED: Record<string, string> = { 'pod-security.kubernetes.io/enforce': 'restricted' };

/** Admin clients of the local cluster and a namespace of this test file's own. */
export interface TestNamespace extends Clients {
  ns: string;
  /** Ferry's cluster API with the admin credentials. */
  cluster: Cluster;
}

/** Creates a fresh namespace `prefix-xxxxxx` before the file's tests and deletes it after them. */
export function useNamespace(prefix: string, labels: Record<string, string> = {}): TestNamespace {
  const env = {} as TestNamespace;
  beforeAll(async () => {
    Object.assign(env, clientsFor(adminKubeConfig()));
    env.cluster = new Cluster(env.kc);
    env.ns = await createNamespace(env, prefix, labels);
  });
  afterAll(async () => {
    if (env.ns) await deleteNamespace(env, env.ns);
  });
  return env;
}

export interface ActivityTestEnv extends TestNamespace {
  deps: ActivityDeps;
  /** The real activities, wired by createActivities as the worker wires them. */
  acts: FerryActivities;
}

/**
 * `useNamespace`, plus the real activities on the admin cluster with test timings. `deps` replaces parts of their
 * dependencies (another Cluster, endpoint overrides), given the namespace once it exists.
 */
export function useActivityEnv(
  prefix: string,
  options: {
    labels?: Record<string, string>;
    timing?: Partial<ActivityTiming>;
    deps?: (env: TestNamespace) => Partial<ActivityDeps>;
  } = {},
): ActivityTestEnv {
  const env = useNamespace(prefix, options.labels) as ActivityTestEnv;
  beforeAll(() => {
    env.deps = { ...testDeps(options.timing), cluster: env.cluster, ...options.deps?.(env) };
    env.acts = createActivities(env.deps);
  });
  return env;
}

/** A workflow harness (bundle, worker connection, client) for the file; `workflowsPath` as for startHarness. */
export function useHarness(workflowsPath?: string): WorkflowHarness {
  const harness = {} as WorkflowHarness;
  let started: WorkflowHarness | undefined;
  beforeAll(async () => {
    started = await startHarness(workflowsPath);
    Object.assign(harness, started);
  });
  afterAll(async () => {
    await started?.close();
  });
  return harness;
}

/** A Ferry worker (createWorker) hosting `stub`'s activities on a cluster of its own, for the whole file. */
export function useFerryWorker(stub: StubActivities): { harness: WorkflowHarness; ferry: FerryTestWorker } {
  const harness = useHarness();
  const ferry = {} as FerryTestWorker;
  let worker: FerryTestWorker | undefined;
  beforeAll(async () => {
    worker = await startFerryWorker(harness, stub);
    Object.assign(ferry, worker);
  });
  afterAll(async () => {
    await worker?.close();
  });
  return { harness, ferry };
}

/**
 * Starts real worker processes (worker/main.ts, the real activities) for the file's tests. After them, every model
 * still running on their clusters is terminated (nothing else would end it once its worker is gone), then they stop.
 */
export function useWorkerProcesses(): (
  cluster: string,
  temporalAddress?: string,
  launch?: WorkerLaunch,
  extraEnv?: Record<string, string>,
) => Promise<WorkerProcess> {
  const workers: WorkerProcess[] = [];
  afterAll(async () => {
    for (const w of workers) await terminateModelsOf(w.cluster).catch(() => undefined);
    for (const w of workers) await w.stop();
  });
  return async (cluster, temporalAddress, launch, extraEnv = {}) => {
    const worker = await startWorkerProcess(cluster, temporalAddress, extraEnv, launch);
    workers.push(worker);
    return worker;
  };
}

/** A simulated GPU node of the file's own, and how a model's pods are sent there (and only there). */
export interface OwnNode {
  name: string;
  /** `spec.scheduling` of a model whose pods run on this node alone. */
  scheduling: { nodeSelector: Record<string, string>; tolerations: V1Toleration[] };
}

/**
 * A simulated GPU node (four GPUs) for this file alone: tainted, so no other test's pods land on it, and labelled, so a
 * model with `scheduling` lands nowhere else. For a test whose result depends on how many GPUs a node has free, which
 * the tests running beside it on the local stack's two shared nodes would change.
 */
export function useOwnNode(): OwnNode {
  const name = `test-node-${randomBytes(3).toString('hex')}`;
  const key = 'ferry.dev/test-node';
  const own: OwnNode = {
    name,
    scheduling: {
      nodeSelector: { [key]: name },
      tolerations: [{ key, operator: 'Equal', value: name, effect: 'NoSchedule' }],
    },
  };
  const c = clientsFor(adminKubeConfig());
  beforeAll(async () => {
    const node = simulatedNode(name, 'us-east-1a') as V1Node;
    node.metadata!.labels![key] = name;
    node.spec = { taints: [{ key, value: name, effect: 'NoSchedule' }] };
    await c.core.createNode({ body: node });
    await waitFor(`node ${name} Ready`, 60_000, async () => {
      const n = await c.core.readNode({ name });
      return n.status?.conditions?.some((x) => x.type === 'Ready' && x.status === 'True');
    });
  });
  afterAll(async () => {
    await c.core.deleteNode({ name }).catch(() => undefined);
  });
  return own;
}
