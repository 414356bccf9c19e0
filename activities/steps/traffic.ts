// A rollout's moves of the requests between revisions (docs/design/rollout.md, sections 3 and 4): the front's
// configuration with new shares, applied and rolled (every front pod runs it), and a revision's engine objects taken
// away once the front sends it nothing.
import type { V1Deployment, V1Pod } from '@kubernetes/client-node';
import { Context } from '@temporalio/activity';
import {
  FAILURE,
  failure,
  type ModelInput,
  type ObjectsInput,
  type RevisionShare,
  type Slot,
} from '../../workflows/contract/index.js';
import {
  admissionConfigMapName,
  deploymentName,
  FRONT_CONFIG_HASH,
  frontSelectorLabels,
  LABEL_COMPONENT,
  modelLabelSelector,
  pullerJobName,
  pvcName,
  serviceName,
  slotBase,
} from '../builders/index.js';
import type { ObjectRef } from '../cluster/api.js';
import { labelSelectorOf } from '../cluster/model-reads.js';
import { ProgressReporter } from '../cluster/progress.js';
import { waitFor } from '../cluster/wait.js';
import { childOptions, timingOf, type ActivityDeps } from '../deps.js';
import { isOurs, isTerminating } from '../readers/ownership.js';
import { rolloutState } from '../readers/revision.js';
import { frontRefs, syncFront } from './front.js';

/**
 * Applies the front with `shares` and waits until every front pod runs it: its Deployment rolled out, and then every
 * old pod gone. The rollout is done while old pods still terminate: each takes no new connection, but finishes the
 * requests it holds with the old shares, sending some to a revision that may be about to be retired. Each revision
 * with a share must have its engine Service already (applyEngine in its slot): HAProxy resolves them when it starts.
 * An old pod takes at most its grace period, the front's hold (the activity's budget is that and more).
 */
export async function shiftTraffic(
  deps: ActivityDeps,
  { model, rootUid, shares }: ObjectsInput & { shares: RevisionShare[] },
): Promise<{ frontPods: number }> {
  if (!model.spec.front) {
    throw failure(FAILURE.InvalidInput, `shiftTraffic: model ${model.metadata.name} has no front to share requests`);
  }
  await syncFront(deps, model, { ...childOptions(deps, rootUid), shares });
  const ref = frontRefs(model)[2];
  const applied = await deps.cluster.get<V1Deployment>(ref);
  const generation = applied?.metadata?.generation ?? 0;
  const timing = timingOf(deps);
  const reporter = new ProgressReporter(deps.progress, timing.progressIntervalMs);
  const said = shares.map((s) => `${s.revision} ${s.weight}%`).join(', ');
  const rolled = await waitFor(deps.cluster, {
    signal: Context.current().cancellationSignal,
    pollMs: timing.pollMs,
    watches: [
      {
        path: `/apis/apps/v1/namespaces/${ref.namespace}/deployments`,
        query: { fieldSelector: `metadata.name=${ref.name}` },
      },
      {
        path: `/api/v1/namespaces/${model.metadata.namespace}/pods`,
        query: { labelSelector: frontSelector(model.metadata.name) },
      },
    ],
    check: async () => {
      const front = await deps.cluster.get<V1Deployment>(ref);
      if (!front) throw failure(FAILURE.KubernetesRejected, `the front Deployment ${ref.name} is gone`);
      const state = rolloutState(front, generation);
      const old = state.done ? await oldFrontPods(deps, model.metadata.name, model.metadata.namespace, front) : [];
      if (state.done && old.length === 0) return { frontPods: state.readyReplicas };
      const finishing =
        old.length === 1
          ? 'an old front pod finishing what it holds'
          : `${old.length} old front pods finishing what they hold`;
      await reporter.report({
        step: 'shift',
        state: state.done ? 'OldFrontPodsFinishing' : state.reason,
        message: `the front moving to ${said}: ${state.done ? `${finishing} (${old.join(', ')})` : state.message}`,
      });
      return undefined;
    },
  });
  // No deadline: the wait ends with an answer, or with its activity's cancellation.
  return rolled ?? { frontPods: 0 };
}

const frontSelector = (name: string) => labelSelectorOf(frontSelectorLabels(name));

/**
 * How long after its deletion deadline a pod still counts: a pod deleted with a grace period has that deadline as its
 * deletionTimestamp, when the kubelet kills it; past it (and this margin for clocks apart) the pod runs nothing, or is
 * on a node that does not answer, which no wait mends.
 */
const PAST_DEADLINE_MS = 10_000;

/**
 * The names of the front's pods, terminating or not, that run another configuration than `front`'s template, less
 * those past their deletion deadline.
 */
async function oldFrontPods(deps: ActivityDeps, name: string, namespace: string, front: V1Deployment) {
  const hash = front.spec?.template?.metadata?.annotations?.[FRONT_CONFIG_HASH];
  const pods = await deps.cluster.list<V1Pod>('v1', 'Pod', namespace, { labelSelector: frontSelector(name) });
  const running = (p: V1Pod) => {
    const deadline = p.metadata?.deletionTimestamp;
    return deadline === undefined || new Date(deadline).getTime() + PAST_DEADLINE_MS > Date.now();
  };
  return pods
    .filter((p) => p.metadata?.annotations?.[FRONT_CONFIG_HASH] !== hash && running(p))
    .map((p) => p.metadata?.name ?? '?')
    .sort();
}

/**
 * Takes away the engine of the revision in `slot`, which the front no longer sends requests to: a puller left by a
 * download cut short, its Deployment, its admission configuration, slot b's engine Service, and its volume unless
 * `keepVolume` (then its weights stay for an undo). Objects gone or not this model's are left; returns what was deleted.
 */
export async function retireRevision(
  deps: ActivityDeps,
  { model, slot, keepVolume }: ModelInput & { slot: Slot; keepVolume: boolean },
): Promise<{ deleted: string[] }> {
  const ns = model.metadata.namespace;
  const base = slotBase(model.metadata.name, slot);
  const ref = (apiVersion: string, kind: string, name: string): ObjectRef => ({
    apiVersion,
    kind,
    name,
    namespace: ns,
  });
  const refs = [
    ref('apps/v1', 'Deployment', deploymentName(base)),
    ref('v1', 'ConfigMap', admissionConfigMapName(base)),
    // Slot a's engine Service is the front's `<name>-engine`, which stays with the front.
    ...(slot === 'b' ? [ref('v1', 'Service', serviceName(base))] : []),
    ...(keepVolume ? [] : [ref('v1', 'PersistentVolumeClaim', pvcName(base))]),
  ];
  // A download cut short (an update or an abort during the candidate's pull) leaves its puller: it goes too.
  const jobs = await deps.cluster.list('batch/v1', 'Job', ns, {
    labelSelector: `${modelLabelSelector(model.metadata.name)},${LABEL_COMPONENT}=puller`,
  });
  const prefix = pullerJobName(base, '');
  for (const job of jobs) {
    const name = job.metadata?.name ?? '';
    if (name.startsWith(prefix)) refs.unshift(ref('batch/v1', 'Job', name));
  }
  const deleted: string[] = [];
  for (const target of refs) {
    const obj = await deps.cluster.get(target);
    if (!obj || !isOurs(obj, model) || isTerminating(obj)) continue;
    await deps.cluster.delete(target, 'Background', { uid: obj.metadata?.uid });
    deleted.push(`${target.kind}/${target.name}`);
  }
  return { deleted };
}
