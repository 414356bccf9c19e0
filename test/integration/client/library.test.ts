// The typed client library against the local Temporal dev server and a Ferry worker with stub activities.
import { randomBytes } from 'node:crypto';
import { WorkflowNotFoundError } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import {
  applyModel,
  ConnectError,
  connectFromEnv,
  deleteModel,
  getModelStatus,
  InvalidSpecError,
  listModels,
  ModelDeletedError,
  ModelExistsError,
  ModelFailedError,
  ModelNotFoundError,
  ModelWorkflowClosedError,
  NoWorkerError,
  serveModel,
  SpecConflictError,
  updateModel,
  waitForPhase,
} from '../../../client/index.js';
import { modelHandle, queryStatus } from '../../../client/model-status.js';
import { taskQueueFor, workflowIdFor, type ModelStatus } from '../../../workflows/contract/index.js';
import { eventually } from '../../support/ferry-worker.js';
import { useFerryWorker } from '../../support/fixtures.js';
import { readLocalEnv } from '../../support/local-env.js';
import { failure, StubActivities } from '../../support/stub-activities.js';
import type { Doc } from '../../support/workflow-harness.js';

const stub = new StubActivities().failForModels('awaitPuller', 'slow-', () =>
  failure('DeadlineExceeded', 'the download did not finish within puller.deadline (10m)'),
);
const { harness, ferry } = useFerryWorker(stub);

const refOf = (doc: Doc) => ({ cluster: ferry.cluster, namespace: 'models', name: doc.metadata.name as string });

describe('client library', () => {
  it('serves idempotently, refuses a different spec, updates, lists, and deletes', async () => {
    const client = harness.client;
    const doc = ferry.doc();
    const ref = refOf(doc);

    const seen: ModelStatus['phase'][] = [];
    const first = await serveModel(client, doc, { wait: true, timeoutMs: 60_000, onStatus: (s) => seen.push(s.phase) });
    expect(first).toMatchObject({
      ref,
      started: true,
      status: { phase: 'Ready', generation: 1, observedGeneration: 1 },
    });
    expect(seen.at(-1)).toBe('Ready');

    const again = await serveModel(client, doc);
    expect(again).toMatchObject({ started: false, runId: first.runId });

    const bigger = ferry.doc((d) => (d.spec.replicas = 3), ref.name);
    const conflict = await serveModel(client, bigger).catch((err: unknown) => err);
    expect(conflict).toBeInstanceOf(SpecConflictError);
    expect((conflict as SpecConflictError).changes).toEqual(['spec.replicas']);

    // An immutable field: the workflow's validator rejects it with field-level issues.
    const rwx = ferry.doc((d) => (d.spec.storage = { accessMode: 'ReadWriteMany' }), ref.name);
    const rejected = await updateModel(client, rwx).catch((err: unknown) => err);
    expect(rejected).toBeInstanceOf(InvalidSpecError);
    expect(rejected).toMatchObject({ rejectedBy: 'workflow' });
    expect((rejected as InvalidSpecError).issues).toEqual([
      {
        path: 'spec.storage.accessMode',
        message: expect.stringMatching(/^cannot change from "ReadWriteOnce" to "ReadWriteMany"/),
      },
    ]);

    const updated = await updateModel(client, bigger, { wait: true, timeoutMs: 60_000 });
    expect(updated).toMatchObject({ generation: 2, changed: true, changes: ['spec.replicas'] });
    expect(updated.status).toMatchObject({ phase: 'Ready', observedGeneration: 2, readyReplicas: 3 });
    // Who asked for each generation (audit): the client's Temporal identity, as it says.
    expect(first.status?.requestedBy).toBe(client.options.identity);
    expect(updated.status?.requestedBy).toBe(client.options.identity);
    expect(updated.status?.timeline.find((e) => e.step === 'update')?.detail).toBe(
      `generation 2: in place, asked by ${client.options.identity}`,
    );
    // After the update, serving the updated spec is the same model again.
    expect(await serveModel(client, bigger)).toMatchObject({ started: false, runId: first.runId });
    expect(await updateModel(client, bigger)).toMatchObject({ generation: 2, changed: false });

    const listed = await eventually(
      () => listModels(client, { phase: 'Ready', cluster: ferry.cluster, namespace: 'models' }, { withStatus: true }),
      (models) => models.some((m) => m.name === ref.name),
    );
    expect(listed.find((m) => m.name === ref.name)).toMatchObject({
      ...ref,
      phase: 'Ready',
      execution: 'RUNNING',
      status: { readyReplicas: 3, generation: 2 },
    });

    const deleted = await deleteModel(client, ref, { wait: true, reason: 'evaluation finished' });
    expect(deleted).toMatchObject({ alreadyDeleted: false, status: { phase: 'Deleted' } });
    expect(deleted.teardown?.deleted).toContain(`Deployment/${ref.name}`);
    expect(await deleteModel(client, ref)).toMatchObject({ alreadyDeleted: true, status: { phase: 'Deleted' } });
    expect(await getModelStatus(client, ref)).toMatchObject({ phase: 'Deleted' });
    await expect(updateModel(client, bigger)).rejects.toBeInstanceOf(ModelNotFoundError);

    // The name is free again: serving it starts a new workflow run.
    const reborn = await serveModel(client, doc);
    expect(reborn.started).toBe(true);
    expect(reborn.runId).not.toBe(first.runId);
    await deleteModel(client, ref, { wait: true });
  });

  it('applies: starts a model that is not served, updates one that is, and leaves the same spec alone', async () => {
    const client = harness.client;
    const doc = ferry.doc();
    const ref = refOf(doc);

    const created = await applyModel(client, doc, { wait: true, timeoutMs: 60_000 });
    expect(created).toMatchObject({ ref, started: true, generation: 1, changed: false, status: { phase: 'Ready' } });
    expect((await modelHandle(client, ref).describe()).runId).toBe(created.runId);

    const same = await applyModel(client, doc);
    expect(same).toMatchObject({ started: false, runId: created.runId, generation: 1, changed: false, changes: [] });

    const bigger = ferry.doc((d) => (d.spec.replicas = 2), ref.name);
    const updated = await applyModel(client, bigger, { wait: true, timeoutMs: 60_000 });
    expect(updated).toMatchObject({
      started: false,
      runId: created.runId,
      generation: 2,
      changed: true,
      sourceChanged: false,
      changes: ['spec.replicas'],
      status: { phase: 'Ready', observedGeneration: 2, readyReplicas: 2 },
    });

    // Immutable fields are refused by the workflow's validator, as with updateModel; the model is untouched.
    const moved = ferry.doc((d) => (d.spec.storage = { accessMode: 'ReadWriteMany' }), ref.name);
    const rejected = await applyModel(client, moved).catch((err: unknown) => err);
    expect(rejected).toBeInstanceOf(InvalidSpecError);
    expect((rejected as InvalidSpecError).issues.map((i) => i.path)).toEqual(['spec.storage.accessMode']);
    expect(await getModelStatus(client, ref)).toMatchObject({ phase: 'Ready', generation: 2 });

    // Deleted, the name is free: applying serves it again in a new run.
    await deleteModel(client, ref, { wait: true });
    const again = await applyModel(client, doc);
    expect(again).toMatchObject({ started: true, generation: 1 });
    expect(again.runId).not.toBe(created.runId);
    await deleteModel(client, ref, { wait: true });
  });

  it('applies with a claim: starts the model, applies again as that claim, and sends nothing to a model another started', async () => {
    const client = harness.client;
    const doc = ferry.doc();
    const ref = refOf(doc);
    const created = await applyModel(client, doc, { claim: 'move/a' });
    expect(created).toMatchObject({ ref, started: true, generation: 1 });
    // The same claim again (a retry of the call that started it): applied as usual.
    const bigger = ferry.doc((d) => (d.spec.replicas = 2), ref.name);
    const retried = await applyModel(client, bigger, { claim: 'move/a' });
    expect(retried).toMatchObject({ started: false, runId: created.runId, generation: 2, changes: ['spec.replicas'] });
    // Another claim, or a model started without one: refused, and the model keeps its spec and generation.
    const three = ferry.doc((d) => (d.spec.replicas = 3), ref.name);
    const taken = await applyModel(client, three, { claim: 'move/b' }).catch((err: unknown) => err);
    expect(taken).toBeInstanceOf(ModelExistsError);
    expect((taken as Error).message).toBe(
      `${ref.name} (namespace models, cluster ${ref.cluster}) is served already, and not by this request: nothing was sent to it`,
    );
    expect(await getModelStatus(client, ref)).toMatchObject({ generation: 2 });
    await deleteModel(client, ref, { wait: true });

    const other = ferry.doc();
    const theirs = await applyModel(client, other);
    const refused = await applyModel(client, other, { claim: 'move/a' }).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(ModelExistsError);
    expect((await modelHandle(client, refOf(other)).describe()).runId).toBe(theirs.runId);
    expect(await getModelStatus(client, refOf(other))).toMatchObject({ generation: 1 });
    await deleteModel(client, refOf(other), { wait: true });
  });

  it('applies nothing for an invalid document', async () => {
    const doc = ferry.doc((d) => (d.spec.replicas = -1));
    const err = await applyModel(harness.client, doc).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidSpecError);
    expect((err as InvalidSpecError).issues.map((i) => i.path)).toEqual(['spec.replicas']);
    await expect(modelHandle(harness.client, refOf(doc)).describe()).rejects.toBeInstanceOf(WorkflowNotFoundError);
  });

  it('validates before starting anything', async () => {
    const doc = ferry.doc((d) => (d.metadata.labels = { 'bad key!': 'x' }));
    const err = await serveModel(harness.client, doc).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidSpecError);
    expect((err as InvalidSpecError).issues.map((i) => i.path)).toEqual(['metadata.labels["bad key!"]']);
    expect((err as InvalidSpecError).message).toMatch(/^invalid ServedModel \(1 problem\):\n {2}metadata\.labels/);
    await expect(modelHandle(harness.client, refOf(doc)).describe()).rejects.toBeInstanceOf(WorkflowNotFoundError);
  });

  it('rejects a wait with the named reason when the model fails', async () => {
    const doc = ferry.doc(undefined, `slow-${randomBytes(3).toString('hex')}`);
    const err = await serveModel(harness.client, doc, { wait: true, timeoutMs: 60_000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelFailedError);
    expect(err).toMatchObject({ reason: 'DeadlineExceeded', error: { step: 'download', generation: 1 } });
    expect((err as ModelFailedError).message).toBe('the download did not finish within puller.deadline (10m)');
    // Waiting for Failed itself is a normal wait.
    const status = await waitForPhase(harness.client, refOf(doc), ['Failed'], { timeoutMs: 5_000 });
    expect(status.lastError?.reason).toBe('DeadlineExceeded');
  });

  it('says why a run failed at its start: the worker refused the document (an older worker than the client)', async () => {
    // What a worker that does not know a field does with it, played by starting the workflow with a document the
    // current parser refuses, bypassing the client's own check.
    const doc = ferry.doc((d) => (d.spec.someFutureField = { on: true }));
    const ref = refOf(doc);
    await harness.client.workflow.start('ServeModelWorkflow', {
      taskQueue: taskQueueFor(ref.cluster),
      workflowId: workflowIdFor(ref),
      args: [{ version: 1, spec: doc }],
    });
    const err = await waitForPhase(harness.client, ref, ['Ready'], { timeoutMs: 30_000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelWorkflowClosedError);
    expect(err).toMatchObject({ executionStatus: 'FAILED', failure: { type: 'InvalidSpec' } });
    expect((err as Error).message).toMatch(/ended \(failed\): InvalidSpec: spec\.someFutureField: unknown field/);
    expect((err as Error).message).toMatch(/is the worker an older Ferry than the client\?/);
    await expect(getModelStatus(harness.client, ref)).rejects.toBeInstanceOf(ModelWorkflowClosedError);
  });

  it('refuses to serve a model while it is being deleted', async () => {
    const gate = stub.gate('tearDown');
    const doc = ferry.doc();
    await serveModel(harness.client, doc, { wait: true, timeoutMs: 60_000 });
    await deleteModel(harness.client, refOf(doc));
    await gate.reached;
    const err = await serveModel(harness.client, doc).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelDeletedError);
    expect((err as Error).message).toMatch(/is being deleted; wait until it is deleted/);
    await expect(waitForPhase(harness.client, refOf(doc), ['Ready'], { timeoutMs: 5_000 })).rejects.toBeInstanceOf(
      ModelDeletedError,
    );
    gate.release();
    expect(await waitForPhase(harness.client, refOf(doc), ['Deleted'], { timeoutMs: 30_000 })).toMatchObject({
      phase: 'Deleted',
    });
  });

  it('says so when a model does not exist, or no worker serves its cluster', async () => {
    const unknown = { cluster: ferry.cluster, namespace: 'models', name: 'never-served' };
    await expect(getModelStatus(harness.client, unknown)).rejects.toBeInstanceOf(ModelNotFoundError);
    await expect(deleteModel(harness.client, unknown)).rejects.toBeInstanceOf(ModelNotFoundError);

    const orphan = ferry.doc((d) => (d.spec.cluster = `nobody-${randomBytes(3).toString('hex')}`));
    const { ref, handle } = await serveModel(harness.client, orphan);
    try {
      const err = await queryStatus(harness.client, ref, { timeoutMs: 1_000 }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(NoWorkerError);
      expect((err as Error).message).toMatch(
        new RegExp(`no Ferry worker polls task queue ferry-${ref.cluster}.*FERRY_CLUSTER=${ref.cluster}`),
      );
    } finally {
      await handle.terminate('test finished');
    }
  });

  it('connects from the environment, and names the address when it cannot', async () => {
    const client = await connectFromEnv({
      env: { TEMPORAL_ADDRESS: readLocalEnv().TEMPORAL_ADDRESS },
      localStack: false,
    });
    try {
      expect(Array.isArray(await listModels(client, { cluster: ferry.cluster }))).toBe(true);
    } finally {
      await client.connection.close();
    }
    const err = await connectFromEnv({
      env: { TEMPORAL_ADDRESS: '127.0.0.1:9' },
      localStack: false,
      connectTimeoutMs: 2_000,
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as Error).message).toMatch(/^cannot connect to Temporal at 127\.0\.0\.1:9: .*check TEMPORAL_ADDRESS/);
  });
});
