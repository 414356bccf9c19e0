// `ferry rollout status|approve|abort|undo NAME` (docs/design/rollout.md).
import { getModelStatus } from '../model-status.js';
import { rolloutAction } from '../rollout-model.js';
import { describeRef } from '../errors.js';
import type { ModelStatus } from '../../workflows/contract/index.js';
import type { Command } from './args.js';
import { resolveRef, type CliContext } from './context.js';
import { isStructured, printName, printStructured } from './output.js';
import { EXIT } from './exit-codes.js';
import { humanDuration } from './format.js';

type RolloutCommand = Extract<Command, { kind: 'rollout' }>;

export async function rolloutCommand(ctx: CliContext, cmd: RolloutCommand): Promise<number> {
  const ref = await resolveRef(ctx, cmd.ref);
  if (cmd.action === 'status') {
    const status = await getModelStatus(ctx.client, ref);
    if (isStructured(cmd.output)) printStructured(ctx, cmd.output, status.rollout ?? null);
    else if (cmd.output === 'name') printName(ctx, ref);
    else ctx.io.stdout.write(`${rolloutLines(status, ctx.io.now())}\n`);
    return EXIT.ok;
  }
  const result = await rolloutAction(ctx.client, ref, cmd.action, {
    ...(cmd.revision ? { revision: cmd.revision } : {}),
    ...(cmd.reason ? { reason: cmd.reason } : {}),
    ...(cmd.keepWeights ? { keepWeights: true } : {}),
  });
  if (isStructured(cmd.output)) printStructured(ctx, cmd.output, result);
  else if (cmd.output === 'name') printName(ctx, ref);
  else {
    const done = {
      approve: `${result.revision} approved`,
      abort: `${result.revision} aborted (rolling back${cmd.keepWeights ? ', its weights kept' : ''})`,
      undo: `returning to ${result.revision} at generation ${result.generation}`,
    }[cmd.action];
    ctx.io.stdout.write(`${describeRef(ref)}: ${done}\n`);
  }
  return EXIT.ok;
}

/** The rollout, its gates and the revisions, one line each. */
export function rolloutLines(status: ModelStatus, now: Date): string {
  const r = status.rollout;
  if (!r) return `${status.name}: no rollout yet (serving ${status.revision ?? 'r1'})`;
  const lines = [
    `${status.name}: ${r.revision} from ${r.from}, ${r.undo ? 'undo' : r.strategy}, ${r.state}` +
      `${r.state === 'Progressing' ? `: step ${r.step} of ${r.steps} at ${r.traffic}%` : ''}` +
      `${r.message ? `: ${r.message}` : ''}`,
  ];
  if (r.awaiting) {
    const left = Math.max(0, Date.parse(r.awaiting.until) - now.getTime());
    lines.push(
      `  waiting for approval: ferry rollout approve ${status.name} -n ${status.namespace} (or abort); ` +
        `${humanDuration(left)} left, then ${r.awaiting.onTimeout}`,
    );
  }
  if (r.evaluating) {
    const left = Math.max(0, Date.parse(r.evaluating.until) - now.getTime());
    lines.push(
      `  evaluating: workflow ${r.evaluating.workflowType} (id ${r.evaluating.workflowId}); ` +
        `${humanDuration(left)} left, then the gate fails`,
    );
  }
  for (const g of r.gates) lines.push(`  step ${g.step} gate ${g.gate}: ${g.result}: ${g.message}`);
  for (const v of status.revisions ?? []) {
    lines.push(`  ${v.name}  ${v.role.padEnd(9)}  ${String(v.weight).padStart(3)}%  slot ${v.slot}  ${v.source}`);
  }
  return lines.join('\n');
}
