// A confirmed problem of an engine pod, as the typed, non-retryable failure that ends the step.
import { type ApplicationFailure } from '@temporalio/common';
import type { Cluster } from '../cluster/api.js';
import { ENGINE_CONTAINER } from '../builders/index.js';
import { FATAL_POD_REASONS, type PodProblem } from '../readers/pod-problems.js';
import { FAILURE, failure, type FailureType } from '../../workflows/contract/index.js';

/** Problems that end a wait (ImagePullBackOff, CrashLoopBackOff, OOMKilled, …), as opposed to waiting states. */
export const fatalProblems = (problems: PodProblem[]): PodProblem[] =>
  problems.filter((p) => !p.waiting && FATAL_POD_REASONS.has(p.reason));

const LOG_TAIL_LINES = 20;
const LOG_TAIL_IN_MESSAGE = 400;

/**
 * vLLM's argument parser refusing the command line: exit code 2 and argparse's last line, `vllm: error: …` (vLLM 0.32:
 * `vllm: error: unrecognized arguments: --no-such-flag`, `… argument --max-model-len: invalid … value: 'x'`).
 */
function argsRefusal(problem: PodProblem, logTail: string): string | undefined {
  if (problem.exitCode !== 2) return undefined;
  const line = logTail
    .trim()
    .split('\n')
    .reverse()
    .find((l) => /^(vllm|[\w.-]+\.py|api_server\.py): error: /.test(l.trim()));
  if (!line) return undefined;
  const said = line.trim().replace(/^[^:]+: error: /, '');
  return `vLLM refused its arguments (container ${ENGINE_CONTAINER} of pod ${problem.pod}, exit code 2): ${said.slice(0, LOG_TAIL_IN_MESSAGE)}; fix spec.engine.args`;
}

/**
 * The failure for a pod problem that has held. A container that died gets the tail of its previous run's log when
 * the kubelet can be asked (not on simulated nodes): in the details, and its last lines in the message.
 */
export async function podFailure(
  cluster: Cluster,
  namespace: string,
  problem: PodProblem,
): Promise<ApplicationFailure> {
  let message = problem.message;
  let logTail: string | undefined;
  if (problem.reason === FAILURE.CrashLoopBackOff || problem.reason === FAILURE.OOMKilled) {
    logTail = await cluster.podLogTail(namespace, problem.pod, ENGINE_CONTAINER, {
      previous: true,
      tailLines: LOG_TAIL_LINES,
    });
    if (logTail) {
      const refused = argsRefusal(problem, logTail);
      if (refused) {
        return failure(FAILURE.EngineArgsRejected, refused, {
          pod: problem.pod,
          reason: FAILURE.EngineArgsRejected,
          exitCode: problem.exitCode ?? null,
          logTail,
        });
      }
      const last = logTail.trim().split('\n').slice(-3).join(' | ');
      message += `; last log lines: ${last.length > LOG_TAIL_IN_MESSAGE ? `…${last.slice(-LOG_TAIL_IN_MESSAGE)}` : last}`;
    }
  }
  return failure(problem.reason as FailureType, message, {
    pod: problem.pod,
    reason: problem.reason,
    exitCode: problem.exitCode ?? null,
    logTail: logTail ?? null,
  });
}
