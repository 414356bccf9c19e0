// awaitRollout: waits, watching, until the Deployment has rolled out the awaited generation by kubectl's rule, and
// turns what its current revision's pods show into named waiting states (progress) or typed failures.
import { Context } from '@temporalio/activity';
import { type ApplicationFailure } from '@temporalio/common';
import {
  FAILURE,
  failure,
  type ModelInput,
  type RolloutResult,
  type ServedModel,
} from '../../workflows/contract/index.js';
import { frontName } from '../builders/index.js';
import { timingOf, type ActivityDeps } from '../deps.js';
import { frontReadyPods } from './front.js';
import { fatalProblems, podFailure } from './engine-failure.js';
import { waitFor } from '../cluster/wait.js';
import { ProblemConfirmer } from '../readers/problem-confirmer.js';
import { assertOurs } from '../readers/ownership.js';
import { ProgressReporter } from '../cluster/progress.js';
import { podsState, rolloutState } from '../readers/revision.js';
import { currentPodProblems, engineWatches, readEngine } from '../cluster/model-reads.js';

// While these hold, where the current revision's pods are (Pending, ContainerCreating, Starting) says more.
const POD_BOUND_REASONS = new Set(['UpdatingReplicas', 'WaitingForAvailable']);

/** The failure for a Deployment that is not there (deleted behind Ferry's back): retryable, the step re-applies it. */
function engineMissing(model: ServedModel, what = 'does not exist'): ApplicationFailure {
  return failure(
    FAILURE.EngineMissing,
    `Deployment ${model.metadata.namespace}/${model.metadata.name} ${what}: the engine must be applied again`,
  );
}

/**
 * Waits until the Deployment has rolled out `generation`: observed, all replicas updated, no old replica left,
 * every updated replica available (a model with spec.scaling: `minReplicas` of them); with 0 replicas, until no engine pod remains. Unschedulable, Multi-Attach and
 * mount problems are reported as progress and waited out; ImagePullBackOff, CrashLoopBackOff and OOMKilled of a
 * current-revision pod fail the step once they have held for a poll interval; so does ProgressDeadlineExceeded.
 */
export async function awaitRollout(
  deps: ActivityDeps,
  { model, generation, slot }: ModelInput & { generation: number },
): Promise<RolloutResult> {
  const ctx = Context.current();
  const timing = timingOf(deps);
  const reporter = new ProgressReporter(deps.progress, timing.progressIntervalMs);
  const confirmer = new ProblemConfirmer(timing.pollMs);
  const ns = model.metadata.namespace;
  const watch = { signal: ctx.cancellationSignal, pollMs: timing.pollMs, watches: engineWatches(model, slot) };

  const result = await waitFor(deps.cluster, {
    ...watch,
    check: async (): Promise<RolloutResult | undefined> => {
      const snapshot = await readEngine(deps.cluster, model, slot);
      const deployment = assertOurs(model, snapshot.deployment);
      if (!deployment) throw engineMissing(model);
      const state = rolloutState(deployment, generation, model.spec.scaling?.minReplicas);
      const readyReplicas = deployment.status?.readyReplicas ?? 0;
      if (state.done) {
        if ((await frontReadyPods(deps, model)) === 0) {
          // The model's Service selects the front's pods: none ready, clients would be refused.
          await reporter.report({
            step: 'rollout',
            state: 'FrontStarting',
            message: `no pod of the front ${frontName(model.metadata.name)} is ready yet`,
            readyReplicas,
          });
          return undefined;
        }
        if (state.replicas > 0 || snapshot.pods.length === 0) {
          return {
            generation: deployment.metadata?.generation ?? generation,
            readyReplicas: state.readyReplicas,
            updatedReplicas: state.updatedReplicas,
          };
        }
        // Scaled to 0: the volume is free only once the last pod is gone.
        await reporter.report({
          step: 'rollout',
          state: 'TerminatingPods',
          message: `${snapshot.pods.length} engine pod(s) still terminating`,
          readyReplicas,
        });
        return undefined;
      }
      if (state.reason === 'DeploymentReplaced') throw engineMissing(model, 'was deleted and created again');

      const problems = await currentPodProblems(deps.cluster, snapshot);
      const fatal = confirmer.confirmed(fatalProblems(problems));
      if (fatal) throw await podFailure(deps.cluster, ns, fatal);
      const top = problems[0];
      if (state.deadlineExceeded) {
        throw failure(FAILURE.ProgressDeadlineExceeded, top ? `${state.message}; ${top.message}` : state.message, {
          generation,
          podProblem: top ? { reason: top.reason, message: top.message } : null,
        });
      }
      await reporter.report({
        step: 'rollout',
        state: top?.reason ?? (POD_BOUND_REASONS.has(state.reason) ? podsState(snapshot) : state.reason),
        message: top?.message ?? state.message,
        readyReplicas,
      });
      return undefined;
    },
  });
  // Without a deadline the wait ends only with a result or by throwing.
  return result!;
}
