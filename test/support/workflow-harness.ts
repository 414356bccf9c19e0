// Runs ServeModelWorkflow on the local Temporal dev server with stub activities: the workflow bundle is built once
// per test file, each test gets its own worker, task queue and model name.
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import {
  Client,
  Connection,
  WorkflowIdConflictPolicy,
  type WorkflowHandle,
  type WorkflowHandleWithFirstExecutionRunId,
} from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import {
  modelRefOf,
  type ModelStatus,
  parseServedModel,
  searchAttributesFor,
  type ServedModel,
  type ServeModelOptions,
  statusQuery,
  taskQueueFor,
  workflowIdFor,
} from '../../workflows/contract/index.js';
import { ServeModelWorkflow } from '../../workflows/serve-model.js';
import { activityInterceptors } from '../../worker/create-worker.js';
import { bundleFerryWorkflows } from '../../worker/workflow-bundle.js';
import { modelEventsSinks } from '../../worker/model-events.js';
import { readLocalEnv, repoRoot } from './local-env.js';
import type { StubActivities } from './stub-activities.js';

export type ModelHandle = WorkflowHandle<typeof ServeModelWorkflow>;
export type StartedModel = WorkflowHandleWithFirstExecutionRunId<typeof ServeModelWorkflow>;

/** Timings shrunk for tests: look often (no watch wakes a stub's model), retry fast, small margins over the spec's budgets. */
export const FAST: ServeModelOptions = {
  watchIntervalMs: 200,
  safetyNetIntervalMs: 200,
  retry: { initialIntervalMs: 100, maximumIntervalMs: 200, maximumAttempts: 2 },
  timeoutMarginMs: 1_000,
};

/** FAST for a rollout's tests: no safety net between its steps, and a health gate that waits 200 ms, not 30 s. */
export const ROLLOUT_OPTIONS: ServeModelOptions = { ...FAST, safetyNetIntervalMs: 3_600_000, healthGateWindowMs: 200 };

let runtimeInstalled = false;

export interface WorkflowHarness {
  client: Client;
  connection: NativeConnection;
  bundle: WorkflowBundleWithSourceMap;
  close(): Promise<void>;
}

/** Bundles the workflows and connects to the dev server named by `.ferry/local.env` (or TEMPORAL_ADDRESS). */
export async function startHarness(workflowsPath = join(repoRoot, 'workflows', 'index.ts')): Promise<WorkflowHarness> {
  if (!runtimeInstalled) {
    Runtime.install({ logger: new DefaultLogger('ERROR') });
    runtimeInstalled = true;
  }
  const address = process.env.TEMPORAL_ADDRESS ?? readLocalEnv().TEMPORAL_ADDRESS;
  const bundle = await workflowBundle(workflowsPath);
  const connection = await NativeConnection.connect({ address });
  const clientConnection = await Connection.connect({ address });
  return {
    client: new Client({ connection: clientConnection }),
    connection,
    bundle,
    async close() {
      await clientConnection.close();
      await connection.close();
    },
  };
}

/**
 * The workflow bundle of `workflowsPath`, built once and reused by later test files until a workflow source (or the
 * lock file) changes: bundling takes seconds, and test files run one after another on small machines.
 */
export async function workflowBundle(
  workflowsPath = join(repoRoot, 'workflows', 'index.ts'),
): Promise<WorkflowBundleWithSourceMap> {
  const workflowsDir = join(repoRoot, 'workflows');
  // Workflow code reaches nothing outside workflows/ (test/unit/workflow-sandbox.test.ts), so these are all its sources.
  const sources = [
    ...readdirSync(workflowsDir, { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.ts'))
      .map((f) => join(workflowsDir, f)),
    join(repoRoot, 'package-lock.json'),
    // How it is bundled (the preloaded modules).
    join(repoRoot, 'worker', 'workflow-bundle.ts'),
    workflowsPath,
  ];
  const hash = createHash('sha256');
  for (const file of sources.sort()) hash.update(file).update(readFileSync(file));
  const cached = join(
    repoRoot,
    'node_modules',
    '.cache',
    'ferry-workflow-bundle',
    `${hash.digest('hex').slice(0, 16)}.json`,
  );
  if (existsSync(cached)) return JSON.parse(readFileSync(cached, 'utf8')) as WorkflowBundleWithSourceMap;
  const bundle = await bundleFerryWorkflows(new DefaultLogger('ERROR'), workflowsPath);
  mkdirSync(dirname(cached), { recursive: true });
  const partial = `${cached}.${process.pid}`;
  writeFileSync(partial, JSON.stringify(bundle));
  renameSync(partial, cached);
  return bundle;
}

/** A valid ServedModel document with a unique name; `patch` edits it before parsing. */
export function modelDoc(patch?: (doc: Doc) => void, name = uniqueName()): Doc {
  const doc: Doc = {
    apiVersion: 'ferry.dev/v1alpha1',
    kind: 'ServedModel',
    metadata: { name, namespace: 'models' },
    spec: {
      cluster: 'test',
      source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct', revision: 'main' } },
      engine: { startupTimeout: '1m' },
      puller: { deadline: '10m' },
    },
  };
  patch?.(doc);
  return doc;
}

// Tests edit documents freely, including into invalid shapes.

export type Doc = Record<string, any>;

export function uniqueName(): string {
  return `m-${randomBytes(5).toString('hex')}`;
}

export interface TestContext {
  client: Client;
  taskQueue: string;
  /** Starts the workflow for `doc` (USE_EXISTING, like the client); terminated at the end of the test if still open. */
  start(doc: Doc, options?: ServeModelOptions): Promise<StartedModel>;
}

/**
 * The `ferry` sink the workflow reports its status changes to, for workers and replayers that host ServeModelWorkflow
 * in tests; the lines are dropped (test/integration/e2e/operations.test.ts checks them on a real worker).
 */
export const TEST_SINKS = modelEventsSinks({
  logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} },
});

/** Runs `fn` while a fresh worker with `stub`'s activities polls a task queue of its own. */
export async function withWorker<T>(
  harness: WorkflowHarness,
  stub: StubActivities,
  fn: (ctx: TestContext) => Promise<T>,
  /** More activities on the same worker (a parent workflow's own). */
  extra: object = {},
): Promise<T> {
  const taskQueue = `${taskQueueFor('test')}-${randomBytes(6).toString('hex')}`;
  const worker = await Worker.create({
    connection: harness.connection,
    taskQueue,
    workflowBundle: harness.bundle,
    activities: { ...stub.activities(), ...extra },
    sinks: TEST_SINKS,
    // The keep-alive heartbeat, as createWorker gives every activity.
    interceptors: { activity: activityInterceptors() },
    // Heartbeats (and so cancellations) reach stubs at once; blocked stubs do not hold up shutdown.
    maxHeartbeatThrottleInterval: '20ms',
    defaultHeartbeatThrottleInterval: '20ms',
    shutdownGraceTime: '200ms',
  });
  const started: ModelHandle[] = [];
  const ctx: TestContext = {
    client: harness.client,
    taskQueue,
    async start(doc, options = FAST) {
      const spec = parseServedModel(doc);
      const handle = await startModel(harness.client, taskQueue, spec, options);
      started.push(handle);
      return handle;
    },
  };
  try {
    return await worker.runUntil(fn(ctx));
  } finally {
    for (const handle of started) {
      await handle.terminate('test finished').catch(() => undefined);
    }
  }
}

export interface ReadyModel extends TestContext {
  doc: Doc;
  handle: StartedModel;
  /** The status once Ready at generation 1. */
  ready: ModelStatus;
}

/** `withWorker`, with a model of `modelDoc()` started and Ready at generation 1 before `fn` runs. */
export function withReadyModel<T>(
  harness: WorkflowHarness,
  stub: StubActivities,
  fn: (model: ReadyModel) => Promise<T>,
): Promise<T> {
  return withWorker(harness, stub, async (ctx) => {
    const doc = modelDoc();
    const handle = await ctx.start(doc);
    const ready = await waitForStatus(handle, readyAt(1));
    return fn({ ...ctx, doc, handle, ready });
  });
}

export async function startModel(
  client: Client,
  taskQueue: string,
  spec: ServedModel,
  options: ServeModelOptions,
  /** The owning tenant, as a tenant's Nexus handler would start it (docs/security.md). */
  tenant?: string,
): Promise<StartedModel> {
  const ref = modelRefOf(spec);
  return client.workflow.start(ServeModelWorkflow, {
    taskQueue,
    workflowId: workflowIdFor(ref),
    args: [{ version: 1, spec, options, ...(tenant !== undefined ? { tenant } : {}) }],
    workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
    typedSearchAttributes: searchAttributesFor(ref, 'Pending'),
  });
}

/** The activities called since the first `from` calls, but the looks that come and go with the watch. */
export const callsSince = (stub: StubActivities, from: number): string[] =>
  stub
    .names()
    .slice(from)
    .filter((n) => n !== 'readStatus' && n !== 'lookAtModel');

/** Polls the status query until `predicate` holds; fails with the last status when it does not in time. */
export async function waitForStatus(
  handle: ModelHandle,
  predicate: (status: ModelStatus) => boolean,
  timeoutMs = 20_000,
): Promise<ModelStatus> {
  const deadline = Date.now() + timeoutMs;
  let last: ModelStatus | undefined;
  for (;;) {
    last = await handle.query(statusQuery);
    if (predicate(last)) return last;
    if (Date.now() > deadline) {
      throw new Error(
        `status did not reach the expected state in ${timeoutMs}ms; last:\n${JSON.stringify(last, null, 2)}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export const phaseIs =
  (...phases: ModelStatus['phase'][]) =>
  (status: ModelStatus): boolean =>
    phases.includes(status.phase);

/** Ready at generation `generation` or later. */
export const readyAt =
  (generation: number) =>
  (status: ModelStatus): boolean =>
    status.phase === 'Ready' && status.observedGeneration >= generation;

/** The phases the workflow went through, in order, read from its search attribute upserts in history. */
export async function phasesFromHistory(handle: ModelHandle): Promise<string[]> {
  const history = await handle.fetchHistory();
  const phases: string[] = [];
  for (const event of history.events ?? []) {
    const fields =
      event.workflowExecutionStartedEventAttributes?.searchAttributes?.indexedFields ??
      event.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields;
    const payload = fields?.FerryPhase;
    if (payload?.data) phases.push(JSON.parse(Buffer.from(payload.data).toString('utf8')) as string);
  }
  return phases.filter((phase, i) => phase !== phases[i - 1]);
}

/** Why the workflow refused an update, in its words (the SDK's error wraps the workflow's failure). */
export async function refusal(sent: Promise<unknown>): Promise<string> {
  const err = await sent.then(
    () => undefined,
    (e: unknown) => e as { cause?: { message?: string; type?: string } },
  );
  if (!err) throw new Error('the update was accepted');
  return `${err.cause?.type}: ${err.cause?.message}`;
}
