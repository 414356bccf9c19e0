// How a new revision replaces the one that serves (docs/design/rollout.md): all at once as before (Recreate), or beside
// it in the model's second slot, taking a share of the requests through the front step by step (Canary) or all of
// them once its gates pass (BlueGreen). Pure (no Node): it is bundled into workflow code.
import { z } from 'zod';
import { parserOnly } from './parser-only.js';
import { NONZERO_DURATION, parseDuration } from './quantities.js';
import { duration, int, mustBe, quote, rules, strict } from './rules.js';

const ROLLOUT_STRATEGIES = ['Recreate', 'BlueGreen', 'Canary'] as const;
const MAX_ROLLOUT_STEPS = 10;
/** The longest pause a step may hold the rollout for. */
const MAX_PAUSE_MS = 7 * 24 * 3_600_000;

const gateMessage = (v: string) =>
  `must be health (the candidate's replicas ready and answering), evaluation (rollout.evaluation's workflow), approval (ferry rollout approve) or a pause like 10m, got ${quote(v)}`;

const NAMED_GATES = ['health', 'evaluation', 'approval'];

/** A step's gate: `health`, `evaluation`, `approval`, or a pause (a duration). */
const gateSchema = rules(z.string({ error: 'must be health, evaluation, approval or a pause like 10m' }), (v) => {
  if (NAMED_GATES.includes(v)) return undefined;
  if (!NONZERO_DURATION.test(v)) return gateMessage(v);
  let ms: number;
  try {
    ms = parseDuration(v);
  } catch {
    return gateMessage(v);
  }
  if (!(ms > 0)) return { message: gateMessage(v), rule: 'duration-range' };
  return ms <= MAX_PAUSE_MS
    ? undefined
    : { message: `must be a pause of at most 7d, got ${quote(v)}`, rule: 'rollout' };
}).meta({ anyOf: [...NAMED_GATES.map((g) => ({ const: g })), { pattern: NONZERO_DURATION.source }] });

/** A Temporal name (a workflow type, a task queue): no blanks, at most 255 characters. */
const TEMPORAL_NAME = /^\S{1,255}$/;
const temporalName = (what: string, example: string) =>
  z
    .string({ error: `must be ${what} like ${example}` })
    .regex(TEMPORAL_NAME, `must be ${what} like ${example}: 1 to 255 characters, no blanks`);

const evaluationSchema = strict({
  workflow: temporalName('a workflow type', 'evaluateCandidate').describe(
    "The team's evaluation workflow, started as a child of the model's workflow for each evaluation gate with a CandidateEvaluation (the candidate's own endpoint, its revision, the step and share). It passes by completing, unless it returns { passed: false, message }.",
  ),
  taskQueue: temporalName('a task queue', 'evaluations').describe(
    "The task queue of the team's worker that hosts the workflow.",
  ),
  timeout: duration('1h', { ms: MAX_PAUSE_MS, message: 'must be at most 7d', rule: 'rollout' })
    .default('1h')
    .describe('How long an evaluation may run (its workflow execution timeout); past it the gate fails. At most 7d.'),
});

const stepSchema = strict({
  traffic: int('a whole percent from 0 to 100')
    .min(0, 'must be from 0 to 100')
    .max(100, 'must be from 0 to 100')
    .describe("The candidate's share of the model's requests during this step, in percent (BlueGreen: 0)."),
  gate: gateSchema
    .default('health')
    .describe(
      "What must hold before the next step: health (the candidate's replicas ready and answering /health, and through the front no more failed requests and no slower answers than it may beside the current revision), evaluation (rollout.evaluation's workflow passes on the candidate), approval (ferry rollout approve NAME), or a pause like 10m.",
    ),
  timeout: duration('24h', { ms: MAX_PAUSE_MS, message: 'must be at most 7d', rule: 'rollout' })
    .optional()
    .describe('With gate approval: how long to wait for it (default 24h), at most 7d.'),
  onTimeout: z
    .enum(['abort', 'approve'], { error: mustBe('abort', 'approve') })
    .optional()
    .describe('With gate approval: what its timeout does (default abort: the candidate is rolled back).'),
});

export const rolloutSchema = strict({
  strategy: z
    .enum(ROLLOUT_STRATEGIES, { error: mustBe(...ROLLOUT_STRATEGIES) })
    .default('Recreate')
    .describe(
      "Recreate: a new revision replaces the engine in place (it serves nothing meanwhile). BlueGreen: it starts beside the current one, and takes every request once its steps' gates pass. Canary: it takes each step's share of the requests, then all of them. BlueGreen and Canary need front.",
    ),
  steps: z
    .array(stepSchema)
    .max(MAX_ROLLOUT_STEPS, `must have at most ${MAX_ROLLOUT_STEPS} steps`)
    .default([])
    .describe(
      'Canary: the shares, in order, each held by its gate (at least one; shares never go down). BlueGreen: the gates before the switch, at share 0. Recreate: none.',
    ),
  evaluation: evaluationSchema.optional().describe("The team's evaluation, for the steps whose gate is evaluation."),
  keepRevisions: int('0 or 1')
    .min(0, 'must be 0 or 1')
    .max(1, 'must be 0 or 1: the model has two slots, the current revision and one other')
    .default(1)
    .describe(
      "Previous revisions whose weights stay on their volume after a rollout (0 or 1): an undo then needn't pull.",
    ),
});

type Rollout = z.output<typeof rolloutSchema>;

/** Issues of `rollout` against the rest of the spec (parser-only rule `rollout`). */
export function rolloutIssues(
  rollout: Rollout,
  spec: { front?: unknown; inferencePool?: unknown },
): { path: (string | number)[]; message: string; params: ReturnType<typeof parserOnly> }[] {
  const issues: { path: (string | number)[]; message: string; params: ReturnType<typeof parserOnly> }[] = [];
  const issue = (path: (string | number)[], message: string) =>
    issues.push({ path: ['spec', 'rollout', ...path], message, params: parserOnly('rollout') });
  const { strategy, steps } = rollout;
  const evaluates = steps.some((step) => step.gate === 'evaluation');
  if (rollout.evaluation && !evaluates) issue(['evaluation'], 'is used by no step: add a step with gate evaluation');
  if (strategy === 'Recreate') {
    if (steps.length > 0) issue(['steps'], 'must be empty with strategy Recreate: steps are for Canary and BlueGreen');
    return issues;
  }
  if (!spec.front) {
    issue(
      ['strategy'],
      `${strategy} needs front (add \`front: {}\`): the front is what shares the requests between revisions`,
    );
  }
  // Not yet: the pool would have to select both slots' pods (docs/design/rollout.md, section 5).
  if (spec.inferencePool) {
    issue(
      ['strategy'],
      `${strategy} cannot be used with inferencePool (the pool selects the first slot's pods only) yet; use Recreate`,
    );
  }
  if (strategy === 'Canary' && steps.length === 0) issue(['steps'], 'needs at least one step with Canary');
  if (evaluates && !rollout.evaluation) {
    const i = steps.findIndex((step) => step.gate === 'evaluation');
    issue(['steps', i, 'gate'], 'needs rollout.evaluation: the workflow and task queue that evaluate the candidate');
  }
  steps.forEach((step, i) => {
    if (step.gate !== 'approval' && (step.timeout !== undefined || step.onTimeout !== undefined)) {
      issue(['steps', i, step.timeout !== undefined ? 'timeout' : 'onTimeout'], 'is only for gate approval');
    }
    if (strategy === 'BlueGreen' && step.traffic !== 0) {
      issue(
        ['steps', i, 'traffic'],
        `must be 0 with BlueGreen: the candidate takes no request until the switch, got ${step.traffic}`,
      );
    }
    if (strategy === 'Canary' && step.traffic === 0) {
      issue(['steps', i, 'traffic'], 'must be above 0 with Canary: a step at 0 is a BlueGreen gate');
    }
    const before = steps[i - 1];
    if (strategy === 'Canary' && before && step.traffic < before.traffic) {
      issue(['steps', i, 'traffic'], `must be at least the step before's ${before.traffic}: a share never goes down`);
    }
  });
  return issues;
}
