// Records the histories that test/integration/workflow/replay.test.ts replays, from real runs of ServeModelWorkflow
// on the local dev server with stub activities. Rerun after a deliberate change of the workflow's commands:
//
//   npm run local:up -- temporal && npx tsx test/histories/record.ts
//
// A history recorded before a change must keep replaying after it (or the change needs `patched`): commit new
// histories next to the old ones rather than replacing them when the workflow changes shape.
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  awaitPhaseUpdate,
  deleteModelSignal,
  deleteModelUpdate,
  FAILURE,
  modelChangedSignal,
  rolloutActionUpdate,
  scaleSignal,
  updateModelUpdate,
  workflowIdFor,
} from '../../workflows/contract/index.js';
import { writeHistory } from '../support/history-files.js';
import { failure, reportProgress, StubActivities, transient } from '../support/stub-activities.js';
import {
  FAST,
  modelDoc,
  phaseIs,
  readyAt,
  startHarness,
  waitForStatus,
  withWorker,
  type StartedModel,
  type TestContext,
  type WorkflowHarness,
} from '../support/workflow-harness.js';

const here = import.meta.dirname;

interface Scenario {
  name: string;
  /** The model's name: fixed, so that histories stay comparable between recordings. */
  model: string;
  stub(): StubActivities;
  run(ctx: TestContext, stub: StubActivities): Promise<StartedModel>;
  /** A workflows file with more than Ferry's workflows (a team's evaluation workflows), hosted by the same worker. */
  workflowsPath?: string;
}

const scenarios: Scenario[] = [
  {
    // Ready, an in-place update, a new source, then delete.
    name: 'ready-update-delete',
    model: 'replay-ready',
    stub: () => new StubActivities(),
    async run({ start }) {
      const doc = modelDoc(undefined, this.model);
      const handle = await start(doc);
      await waitForStatus(handle, readyAt(1));
      doc.spec.engine.args = ['--max-model-len=4096'];
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      await waitForStatus(handle, readyAt(2));
      doc.spec.source.huggingface.revision = 'v2';
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      await waitForStatus(handle, readyAt(3));
      await handle.executeUpdate(deleteModelUpdate, { args: [{ reason: 'recorded' }] });
      await handle.result();
      return handle;
    },
  },
  {
    // Progress while downloading, a crash-looping engine (Failed), a fix, Degraded and back, teardown retried.
    name: 'failed-fixed-degraded-delete',
    model: 'replay-failed',
    stub() {
      let looks = 0;
      const look = () => {
        looks++;
        return looks === 2
          ? { replicas: 1, readyReplicas: 0, problem: { reason: 'CrashLoopBackOff', message: 'restarted' } }
          : { replicas: 1, readyReplicas: 1 };
      };
      return new StubActivities()
        .once('awaitPuller', async (input) => {
          await reportProgress({ step: 'download', state: 'Running', bytes: 10, totalBytes: 100 });
          return { jobName: input.jobName, durationMs: 5 };
        })
        .throwOnce('awaitHealth', failure(FAILURE.CrashLoopBackOff, 'exit code 1'))
        // readStatus in the recording committed before the watch; lookAtModel in a new one.
        .on('readStatus', async () => look())
        .on('lookAtModel', async () => ({ ...look(), repaired: [] }))
        .throwOnce('tearDown', transient(FAILURE.TeardownIncomplete, 'Service/x: timeout'));
    },
    async run({ start }) {
      const doc = modelDoc(undefined, this.model);
      const handle = await start(doc);
      await waitForStatus(handle, phaseIs('Failed'));
      doc.spec.engine.args = ['--enforce-eager'];
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      await waitForStatus(handle, readyAt(2));
      await waitForStatus(
        handle,
        (s) => s.phase === 'Ready' && s.timeline.some((e) => e.step === 'degraded' && e.endedAt),
      );
      await handle.executeUpdate(deleteModelUpdate, { args: [{}] });
      await handle.result();
      return handle;
    },
  },
  {
    // An update cancels a running download; then the workflow is cancelled and tears down.
    name: 'download-superseded-cancelled',
    model: 'replay-cancel',
    stub: () => new StubActivities(),
    async run({ start }, stub) {
      const gate = stub.gate('awaitPuller');
      const doc = modelDoc(undefined, this.model);
      const handle = await start(doc);
      await gate.reached;
      doc.spec.source.huggingface.revision = 'v2';
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      await waitForStatus(handle, readyAt(2));
      await handle.cancel();
      await handle.result().catch(() => undefined);
      return handle;
    },
  },
  {
    // The watch that reconciles: a wake finds a deleted Service and puts it back; a later wake finds the weights
    // volume being deleted, and the whole sequence runs again (stop, claim, storage, download, release, rollout).
    name: 'woken-repaired-rebuilt',
    model: 'replay-watch',
    stub() {
      return new StubActivities()
        .once('lookAtModel', async () => ({ replicas: 1, readyReplicas: 1, repaired: ['Service/x deleted; re-applied'] }))
        .once('lookAtModel', async () => ({
          replicas: 1,
          readyReplicas: 0,
          repaired: [],
          lost: { object: 'PersistentVolumeClaim/x-weights', reason: 'VolumeTerminating', message: 'being deleted' },
        }));
    },
    async run({ start }, stub) {
      const handle = await start(modelDoc(undefined, this.model), { ...FAST, safetyNetIntervalMs: 3_600_000 });
      await waitForStatus(handle, readyAt(1));
      await handle.signal(modelChangedSignal, { objects: ['Service/x'] });
      await waitForStatus(handle, (s) => s.timeline.some((e) => e.step === 'repair'));
      await handle.signal(modelChangedSignal, { objects: ['PersistentVolumeClaim/x-weights'] });
      await waitForStatus(handle, (s) => s.phase === 'Ready' && stub.callsOf('claimName').length === 2);
      await handle.executeUpdate(deleteModelUpdate, { args: [{}] });
      await handle.result();
      return handle;
    },
  },
  {
    // Phase waits held as updates: one answered at Ready, one in flight let go when the run continues as new.
    name: 'awaited-let-go',
    model: 'replay-await',
    stub: () => new StubActivities(),
    async run({ start }) {
      const handle = await start(modelDoc(undefined, this.model), { ...FAST, continueAsNewAfterEvents: 150 });
      await handle.executeUpdate(awaitPhaseUpdate, { args: [{ phases: ['Ready'], generation: 1 }] });
      const letGo = await handle.executeUpdate(awaitPhaseUpdate, { args: [{ phases: ['Degraded'], generation: 1 }] });
      if (letGo.phase !== 'Ready') throw new Error(`the wait for Degraded returned ${letGo.phase}, not Ready`);
      for (;;) {
        const { runId } = await handle.describe();
        if (runId !== handle.firstExecutionRunId) break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      return handle;
    },
  },
  {
    // The first run of a model that continues as new while Ready.
    name: 'continued-as-new',
    model: 'replay-can',
    stub: () => new StubActivities(),
    async run({ start }) {
      const handle = await start(modelDoc(undefined, this.model), {
        ...FAST,
        watchIntervalMs: 100,
        continueAsNewAfterEvents: 40,
      });
      await waitForStatus(handle, readyAt(1));
      for (;;) {
        const { runId } = await handle.describe();
        if (runId !== handle.firstExecutionRunId) break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      return handle;
    },
  },
  {
    // LoRA adapters: loaded after the health check; a look finds a new engine pod (Degraded until they are loaded
    // there); an adapter refused for good (Degraded AdapterFailed); a new list in place; delete.
    name: 'adapters-loaded-refused-replaced',
    model: 'replay-adapters',
    stub: () => {
      let pod = 'replay-adapters-0/aaaaaaaa/0';
      const stub = new StubActivities()
        .on('lookAtModel', async () => {
          pod = 'replay-adapters-1/bbbbbbbb/0';
          return { replicas: 1, readyReplicas: 1, repaired: [], incarnations: [pod] };
        })
        .on('syncAdapters', async ({ model }) => ({
          adapters: (model.spec.engine.lora.adapters ?? []).map((a) =>
            a.name === 'bad'
              ? {
                  name: a.name,
                  loadedReplicas: 0,
                  readyReplicas: 1,
                  error: { reason: 'AdapterRefused' as const, message: 'No adapter found (HTTP 404)', permanent: true },
                }
              : { name: a.name, loadedReplicas: 1, readyReplicas: 1 },
          ),
          unloaded: [],
          incarnations: [pod],
        }));
      return stub;
    },
    async run({ start }) {
      const adapters = (...names: string[]) =>
        names.map((name) => ({ name, source: { huggingface: { repo: `org/${name}-lora`, revision: 'main' } } }));
      const doc = modelDoc((d) => (d.spec.engine.lora = { enabled: true, adapters: adapters('sql') }), this.model);
      const handle = await start(doc, { ...FAST, safetyNetIntervalMs: 3_600_000 });
      await waitForStatus(handle, readyAt(1));
      await handle.signal(modelChangedSignal, { objects: ['Pod/replay-adapters-1'] });
      await waitForStatus(handle, (s) => s.timeline.filter((e) => e.step === 'degraded').length === 1 && s.phase === 'Ready');
      doc.spec.engine.lora.adapters = adapters('sql', 'bad');
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      await waitForStatus(handle, (s) => s.phase === 'Degraded' && s.lastError?.reason === 'AdapterFailed');
      doc.spec.engine.lora.adapters = adapters('sql', 'code');
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      await waitForStatus(handle, readyAt(3));
      await handle.executeUpdate(deleteModelUpdate, { args: [{ reason: 'recorded' }] });
      await handle.result();
      return handle;
    },
  },
  {
    // A latency goal: the baseline measured before Ready; kept across a label change; measured again after new
    // engine args; delete.
    name: 'baseline-measured-kept-remeasured',
    model: 'replay-baseline',
    stub: () => new StubActivities(),
    async run({ start }) {
      const doc = modelDoc((d) => (d.spec.slo = { ttft: '2s', itl: '100ms' }), this.model);
      const handle = await start(doc, { ...FAST, safetyNetIntervalMs: 3_600_000 });
      await waitForStatus(handle, readyAt(1));
      doc.metadata.labels = { team: 'search' };
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      await waitForStatus(handle, readyAt(2));
      doc.spec.engine.args = ['--max-num-seqs=16'];
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      await waitForStatus(handle, readyAt(3));
      await handle.executeUpdate(deleteModelUpdate, { args: [{ reason: 'recorded' }] });
      await handle.result();
      return handle;
    },
  },
  {
    // Admission: writing the measured limit fails both attempts of the activity; the step's retry writes it again
    // from the measurement it has (patched 'admission-retried-alone'), then Ready; delete.
    name: 'admission-limit-retried',
    model: 'replay-admission',
    stub: () =>
      new StubActivities()
        .throwOnce('applyAdmission', transient('KubernetesHttp503'))
        .throwOnce('applyAdmission', transient('KubernetesHttp503')),
    async run({ start }, stub) {
      const doc = modelDoc((d) => (d.spec.slo = { ttft: '2s', itl: '100ms' }), this.model);
      const handle = await start(doc, { ...FAST, safetyNetIntervalMs: 3_600_000 });
      await waitForStatus(handle, readyAt(1));
      if (stub.callsOf('measureBaseline').length !== 1 || stub.callsOf('applyAdmission').length !== 3) {
        throw new Error('expected one measurement and three writes of the limit');
      }
      await handle.executeUpdate(deleteModelUpdate, { args: [{ reason: 'recorded' }] });
      await handle.result();
      return handle;
    },
  },
  {
    // A model with spec.scaling: a decision applied, a stale one dropped, an update at the count in force, a decision
    // down, then delete.
    name: 'scaled-out-updated-in',
    model: 'replay-scaling',
    stub: () => new StubActivities(),
    async run({ start }, stub) {
      const doc = modelDoc((d) => {
        d.spec.scaling = { minReplicas: 1, maxReplicas: 4, targetConcurrency: 2 };
      }, this.model);
      const handle = await start(doc, { ...FAST, safetyNetIntervalMs: 3_600_000 });
      await waitForStatus(handle, readyAt(1));
      await handle.signal(scaleSignal, { replicas: 3, from: 1, reason: 'load 5 over target 2 held 15s' });
      await waitForStatus(handle, (s) => s.scaling?.replicas === 3);
      await handle.signal(scaleSignal, { replicas: 3, from: 1, reason: 'a duplicate' });
      doc.metadata.labels = { team: 'search' };
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      await waitForStatus(handle, readyAt(2));
      await handle.signal(scaleSignal, { replicas: 2, from: 3, reason: 'load 2 over target 2 for 5m' });
      await waitForStatus(handle, (s) => s.scaling?.replicas === 2);
      if (stub.callsOf('scaleEngine').length !== 2) throw new Error('expected two decisions applied');
      await handle.executeUpdate(deleteModelUpdate, { args: [{ reason: 'recorded' }] });
      await handle.result();
      return handle;
    },
  },
  {
    // Scale to zero: a model with a front goes to 0 on a decision (Idle), is updated while Idle (applied at 0), is woken
    // by the next decision (Starting until /health, then Ready), then deleted.
    name: 'idle-updated-woken',
    model: 'replay-idle',
    stub: () => new StubActivities(),
    async run({ start }, stub) {
      const doc = modelDoc((d) => {
        d.spec.scaling = { minReplicas: 1, maxReplicas: 2, targetConcurrency: 2, idleToZeroAfter: '30m' };
        d.spec.front = {};
      }, this.model);
      const handle = await start(doc, { ...FAST, safetyNetIntervalMs: 3_600_000 });
      await waitForStatus(handle, readyAt(1));
      await handle.signal(scaleSignal, { replicas: 0, from: 1, reason: 'no request for 30m 00s' });
      await waitForStatus(handle, phaseIs('Idle'));
      doc.metadata.labels = { team: 'search' };
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      await waitForStatus(handle, (s) => s.phase === 'Idle' && s.observedGeneration === 2);
      await handle.signal(scaleSignal, { replicas: 1, from: 0, reason: 'a request held at zero: 0 → 1 at once' });
      await waitForStatus(handle, (s) => s.phase === 'Ready' && s.replicas === 1);
      if (stub.callsOf('scaleEngine').length !== 2) throw new Error('expected the zero and the wake applied');
      await handle.executeUpdate(deleteModelUpdate, { args: [{ reason: 'recorded' }] });
      await handle.result();
      return handle;
    },
  },
  {
    // spec.rollout Canary: a new source promoted through a 50 % step with a pause, then one whose health gate fails and
    // is rolled back, then delete.
    name: 'canary-promoted-rolled-back',
    model: 'replay-canary',
    stub: () =>
      new StubActivities().on('readStatus', async (input) =>
        input.model.spec.source.huggingface?.revision === 'broken'
          ? { replicas: 1, readyReplicas: 0, problem: { reason: 'CrashLoopBackOff', message: 'vllm exited 1' } }
          : { replicas: 1, readyReplicas: 1 },
      ),
    async run({ start }) {
      const doc = modelDoc((d) => {
        d.spec.front = {};
        d.spec.rollout = { strategy: 'Canary', steps: [{ traffic: 10 }, { traffic: 50, gate: '1s' }] };
      }, this.model);
      const options = { ...FAST, safetyNetIntervalMs: 3_600_000, healthGateWindowMs: 200 };
      const handle = await start(doc, options);
      await waitForStatus(handle, readyAt(1));
      doc.spec.source.huggingface.revision = 'v2';
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      await waitForStatus(handle, (s) => s.rollout?.state === 'Promoted' && s.phase === 'Ready');
      doc.spec.source.huggingface.revision = 'broken';
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      await waitForStatus(handle, (s) => s.rollout?.state === 'Aborted');
      await handle.executeUpdate(deleteModelUpdate, { args: [{ reason: 'recorded' }] });
      await handle.result();
      return handle;
    },
  },
  {
    // spec.rollout Canary with an approval gate: approved by `ferry rollout approve`, then the next rollout aborted by
    // `ferry rollout abort` during its pause, then delete.
    name: 'canary-approved-aborted',
    model: 'replay-approval',
    stub: () => new StubActivities(),
    async run({ start }) {
      const doc = modelDoc((d) => {
        d.spec.front = {};
        d.spec.rollout = { strategy: 'Canary', steps: [{ traffic: 20, gate: 'approval', timeout: '1h' }] };
      }, this.model);
      const handle = await start(doc, { ...FAST, safetyNetIntervalMs: 3_600_000 });
      await waitForStatus(handle, readyAt(1));
      doc.spec.source.huggingface.revision = 'v2';
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      await waitForStatus(handle, (s) => s.rollout?.awaiting !== undefined);
      await handle.executeUpdate(rolloutActionUpdate, { args: [{ action: 'approve', reason: 'recorded' }] });
      await waitForStatus(handle, readyAt(2));
      doc.spec.rollout.steps = [{ traffic: 20, gate: '1h' }];
      doc.spec.source.huggingface.revision = 'v3';
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      await waitForStatus(handle, (s) => s.rollout?.revision === 'r3' && s.rollout.traffic === 20);
      await handle.executeUpdate(rolloutActionUpdate, { args: [{ action: 'abort', reason: 'recorded' }] });
      await waitForStatus(handle, (s) => s.rollout?.state === 'Aborted' && s.phase === 'Ready');
      await handle.executeUpdate(deleteModelUpdate, { args: [{ reason: 'recorded' }] });
      await handle.result();
      return handle;
    },
  },
  {
    // An evaluation gate: the team's workflow (a child on its task queue) passes r2, then fails r3, which rolls back.
    name: 'canary-evaluated-passed-failed',
    model: 'replay-evaluation',
    workflowsPath: join(here, '..', 'integration', 'workflow', 'fixtures', 'evaluate-candidate.ts'),
    stub: () => new StubActivities(),
    async run({ start, taskQueue }) {
      const doc = modelDoc((d) => {
        d.spec.front = {};
        d.spec.rollout = {
          strategy: 'Canary',
          steps: [{ traffic: 20, gate: 'evaluation' }],
          evaluation: { workflow: 'passingEvaluation', taskQueue },
        };
      }, this.model);
      const handle = await start(doc, { ...FAST, safetyNetIntervalMs: 3_600_000 });
      await waitForStatus(handle, readyAt(1));
      doc.spec.source.huggingface.revision = 'v2';
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      await waitForStatus(handle, readyAt(2));
      doc.spec.rollout.evaluation.workflow = 'failingEvaluation';
      doc.spec.source.huggingface.revision = 'v3';
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      await waitForStatus(handle, (s) => s.rollout?.revision === 'r3' && s.rollout.state === 'Aborted');
      await handle.executeUpdate(deleteModelUpdate, { args: [{ reason: 'recorded' }] });
      await handle.result();
      return handle;
    },
  },
  {
    // An undo back to r1 from its kept volume, with no gate; then an abort that keeps the candidate's weights.
    name: 'canary-undone-abort-kept',
    model: 'replay-undo',
    stub: () => new StubActivities(),
    async run({ start }) {
      const doc = modelDoc((d) => {
        d.spec.front = {};
        d.spec.rollout = { strategy: 'Canary', steps: [{ traffic: 50, gate: '1s' }] };
      }, this.model);
      const handle = await start(doc, { ...FAST, safetyNetIntervalMs: 3_600_000, healthGateWindowMs: 200 });
      await waitForStatus(handle, readyAt(1));
      doc.spec.source.huggingface.revision = 'v2';
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      await waitForStatus(handle, readyAt(2));
      await handle.executeUpdate(rolloutActionUpdate, { args: [{ action: 'undo', reason: 'recorded' }] });
      await waitForStatus(handle, readyAt(3));
      doc.spec.rollout.steps = [{ traffic: 50, gate: '1h' }];
      doc.spec.source.huggingface.revision = 'v3';
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      await waitForStatus(handle, (s) => s.rollout?.revision === 'r3' && s.rollout.traffic === 50);
      await handle.executeUpdate(rolloutActionUpdate, { args: [{ action: 'abort', keepWeights: true }] });
      await waitForStatus(handle, (s) => s.rollout?.state === 'Aborted' && s.phase === 'Ready');
      await handle.executeUpdate(deleteModelUpdate, { args: [{ reason: 'recorded' }] });
      await handle.result();
      return handle;
    },
  },
  {
    // spec.expiresAt: moved once by an update (its timer replaced), then the model deletes itself.
    name: 'expired-after-moved',
    model: 'replay-expiry',
    stub: () => new StubActivities(),
    async run({ start }) {
      const soon = (s: number) => new Date(Date.now() + s * 1000).toISOString();
      const doc = modelDoc((d) => (d.spec.expiresAt = soon(2)), this.model);
      const handle = await start(doc, { ...FAST, safetyNetIntervalMs: 3_600_000 });
      await waitForStatus(handle, readyAt(1));
      doc.spec.expiresAt = soon(4);
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      await handle.result();
      return handle;
    },
  },
  {
    // spec.scaling.schedule: a window every minute, open 20 s; started closed, raised when it opens (the engine
    // applied again at 2), lowered when it closes, then deleted.
    name: 'schedule-raised-lowered',
    model: 'replay-schedule',
    stub: () => new StubActivities(),
    async run({ start }) {
      while (new Date().getUTCSeconds() < 25 || new Date().getUTCSeconds() >= 40) await sleep(250);
      const doc = modelDoc((d) => {
        d.spec.scaling = {
          ...{ minReplicas: 1, maxReplicas: 4, targetConcurrency: 2 },
          schedule: [{ cron: '* * * * *', minReplicas: 2, for: '20s' }],
        };
      }, this.model);
      const handle = await start(doc, { ...FAST, safetyNetIntervalMs: 3_600_000 });
      await waitForStatus(handle, readyAt(1));
      await waitForStatus(handle, (s) => s.scaling?.minReplicas === 2, 60_000);
      await waitForStatus(handle, (s) => s.scaling?.minReplicas === 1, 30_000);
      await handle.executeUpdate(deleteModelUpdate, { args: [{ reason: 'recorded' }] });
      await handle.result();
      return handle;
    },
  },
  {
    // Ready, then deleted by the delete signal with movedTo, as a move whose source's worker was gone sends it.
    name: 'signalled-delete-moved',
    model: 'replay-signalled-moved',
    stub: () => new StubActivities(),
    async run({ start }) {
      const handle = await start(modelDoc(undefined, this.model));
      await waitForStatus(handle, readyAt(1));
      const movedTo = { cluster: 'west', endpoint: 'http://replay.west:8000', move: 'move/models/replay-signalled-moved' };
      await handle.signal(deleteModelSignal, { reason: 'moved to cluster west', movedTo });
      await handle.result();
      return handle;
    },
  },
];

async function record(harness: WorkflowHarness, scenario: Scenario): Promise<void> {
  // A run left open by an interrupted recording would be reused (the harness starts with USE_EXISTING).
  const id = workflowIdFor({ cluster: 'test', namespace: 'models', name: scenario.model });
  await harness.client.workflow
    .getHandle(id)
    .terminate('a new recording starts')
    .catch(() => undefined);
  const stub = scenario.stub();
  await withWorker(harness, stub, async (ctx) => {
    const handle = await scenario.run(ctx, stub);
    // The first run only: continue-as-new starts a history of its own.
    const first = harness.client.workflow.getHandle(handle.workflowId, handle.firstExecutionRunId);
    const history = await first.fetchHistory();
    const file = join(here, `${scenario.name}.json`);
    writeHistory(file, history);
    console.log(`${file}: ${history.events?.length ?? 0} events`);
  });
}

const harnesses = new Map<string | undefined, WorkflowHarness>();
try {
  const only = process.argv.slice(2);
  for (const scenario of scenarios) {
    if (only.length > 0 && !only.includes(scenario.name)) continue;
    let harness = harnesses.get(scenario.workflowsPath);
    if (!harness) {
      harness = await startHarness(scenario.workflowsPath);
      harnesses.set(scenario.workflowsPath, harness);
    }
    await record(harness, scenario);
  }
} finally {
  for (const harness of harnesses.values()) await harness.close();
}
