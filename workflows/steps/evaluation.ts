// A rollout's evaluation gate (docs/design/rollout.md, section 4): the team's own workflow, started as a child on the
// team's task queue, judges the candidate on its own endpoint while it takes the step's share through the front. It
// passes by completing, unless it returns `{ passed: false }`; it fails by failing, timing out or saying so. An abort
// of the rollout cancels it (without waiting for it to stop). Workflow code.
import {
  ChildWorkflowCancellationType,
  executeChild,
  isCancellation,
  ParentClosePolicy,
  workflowInfo,
} from '@temporalio/workflow';
import {
  modelRefOf,
  parseDuration,
  type CandidateEvaluation,
  type HealthResult,
  type ServedModel,
} from '../contract/index.js';
import type { RolloutRevisions } from '../status/rollout.js';
import { evaluating } from '../status/rollout.js';
import { now, type StepContext } from './context.js';

/** The longest part of an evaluation's answer that the gate's message keeps. */
const MESSAGE_MAX = 300;

export interface GateVerdict {
  result: 'Passed' | 'Failed';
  message: string;
}

/** Runs `spec.rollout.evaluation`'s workflow on the candidate for step `step` (1-based) at `traffic` percent. */
export async function evaluationGate(
  ctx: StepContext,
  spec: ServedModel,
  r: RolloutRevisions,
  health: HealthResult,
  step: number,
  traffic: number,
): Promise<GateVerdict> {
  const evaluation = spec.spec.rollout!.evaluation!;
  const workflowId = `${workflowInfo().workflowId}/evaluate/${r.candidate.name}/step-${step}`;
  const input: CandidateEvaluation = {
    model: modelRefOf(spec),
    revision: r.candidate.name,
    current: r.current.name,
    endpoint: health.engineEndpoint ?? health.endpoint,
    modelEndpoint: health.endpoint,
    servedModelName: spec.spec.engine.servedModelName,
    source: r.candidate.source,
    step,
    traffic,
  };
  const timeoutMs = parseDuration(evaluation.timeout);
  const since = now();
  const until = new Date(Date.parse(since) + timeoutMs).toISOString();
  ctx.set(evaluating(ctx.status, { workflowId, workflowType: evaluation.workflow, since, until }, since));
  try {
    const answer: unknown = await executeChild(evaluation.workflow, {
      workflowId,
      taskQueue: evaluation.taskQueue,
      args: [input],
      workflowExecutionTimeout: timeoutMs,
      cancellationType: ChildWorkflowCancellationType.TRY_CANCEL,
      parentClosePolicy: ParentClosePolicy.TERMINATE,
    });
    return verdictOf(evaluation.workflow, answer);
  } catch (err) {
    if (isCancellation(err)) throw err;
    return { result: 'Failed', message: `${evaluation.workflow} ${workflowId}: ${causeOf(err)}` };
  } finally {
    ctx.set(evaluating(ctx.status, undefined, now()));
  }
}

/** Completed: passed, unless the answer says `passed: false`. */
function verdictOf(workflowType: string, answer: unknown): GateVerdict {
  const said = typeof answer === 'object' && answer !== null ? (answer as Record<string, unknown>) : undefined;
  const message = typeof said?.message === 'string' ? clip(said.message) : undefined;
  if (said?.passed === false) return { result: 'Failed', message: message ?? `${workflowType} returned passed: false` };
  if (message !== undefined) return { result: 'Passed', message };
  const json = answer === undefined ? undefined : (JSON.stringify(answer) as string | undefined);
  const shown = json === undefined ? '' : `: ${clip(json)}`;
  return { result: 'Passed', message: `${workflowType} completed${shown}` };
}

/** The innermost failure's message: a child's failure wraps the workflow's own error (or its timeout). */
function causeOf(err: unknown): string {
  let at: unknown = err;
  const said: string[] = [];
  while (at instanceof Error) {
    if (at.message) said.push(at.message);
    at = (at as { cause?: unknown }).cause;
  }
  return clip(said.at(-1) ?? String(err));
}

const clip = (text: string) => (text.length > MESSAGE_MAX ? `${text.slice(0, MESSAGE_MAX - 1)}…` : text);
