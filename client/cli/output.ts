// What `-o` prints besides text: the command's result as JSON or YAML, or only the model's name as kubectl's `-o name`
// does (`servedmodel/qwen`). Loads YAML, so the commands import it, not the prelude that `--help` runs.
import { stringify } from 'yaml';
import type { ModelRef } from '../../workflows/contract/index.js';
import type { CliIO } from './io.js';

type Output = 'text' | 'json' | 'yaml' | 'name';

/** Whether `-o` asks for the whole result as data. */
export const isStructured = (output: Output): output is 'json' | 'yaml' => output === 'json' || output === 'yaml';

/** `value` as `-o json` or `-o yaml` prints it. */
export function printStructured(ctx: { io: CliIO }, output: 'json' | 'yaml', value: unknown): void {
  ctx.io.stdout.write(output === 'json' ? `${JSON.stringify(value, null, 2)}\n` : stringify(value, { lineWidth: 0 }));
}

/** `-o name`: the model as kubectl names an object, kind and name. */
export function printName(ctx: { io: CliIO }, ref: Pick<ModelRef, 'name'>): void {
  ctx.io.stdout.write(`servedmodel/${ref.name}\n`);
}
