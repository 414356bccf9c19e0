// What `ferry update` and `ferry delete` print once the workflow has answered. The commands print them (serve.ts,
// delete.ts), and so does the prelude when that answer is all a command waits for (prepare.ts `finishEarly`): free of
// the Temporal SDK and of zod, like everything the prelude loads before it needs them.
import { describeRef, type ModelRef } from '../../workflows/contract/identity.js';
import type { UpdateResult } from '../../workflows/contract/messages.js';

/** `models/qwen`: the model as `ferry update` and `ferry apply` name it. */
export const shortRef = (ref: ModelRef): string => `${ref.namespace}/${ref.name}`;

/** `generation 3: spec.engine.args changed`. */
export function changeLine(result: UpdateResult): string {
  if (!result.changed) return `generation ${result.generation}: no change`;
  const weights = result.sourceChanged ? ' (new weights: the engine stops while they download)' : '';
  return `generation ${result.generation}: ${result.changes.join(', ')} changed${weights}`;
}

/** What `ferry update` prints once the workflow has taken the change. */
export function updatedLine(ref: ModelRef, result: UpdateResult): string {
  return `updated ${shortRef(ref)}: ${changeLine(result)}`;
}

/** What `ferry delete` without `--wait` prints once the workflow has taken the request. */
export function deletingLine(ref: ModelRef): string {
  return `deleting ${describeRef(ref)} (follow it with \`ferry watch ${ref.name} -n ${ref.namespace}\`)`;
}
