// The table of vLLM's flags (workflows/contract/spec/vllm-flags.ts) against the real vLLM's own parser, when the vLLM
// runtime is installed (`npm run local:up -- --engine vllm`; FERRY_VLLM_PYTHON names another python with vLLM).
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { readVllmFlags, VLLM_FLAGS_FILE, vllmFlagsSource, vllmPython } from '../../deploy/schema/gen-vllm-flags.js';
import { safeParseServedModel } from '../../workflows/contract/index.js';
import { VLLM_FLAG_VALUES, VLLM_FLAGS_VERSION } from '../../workflows/contract/spec/vllm-flags.js';
import { minimalHf } from './fixtures.js';

const python = vllmPython();
const missing = !existsSync(python);
const skipped = missing
  ? ` (skipped: the vLLM runtime is not installed at ${python}; npm run local:up -- --engine vllm installs it)`
  : '';

// Arguments the spec parser must judge as vLLM does: accepted, or refused at start-up. Not among them: Ferry's own
// flags (refused for other reasons) and flags this vLLM does not know (let through for other vLLM versions).
const CASES: string[][] = [
  ['--max-num-seqs', '8'],
  ['--max-num-seqs=8'],
  ['--enforce-eager'],
  ['--no-enforce-eager'],
  ['--no_enforce_eager'],
  ['--lora-modules', 'a=/x', 'b=/y'],
  ['--seed', '-1'],
  ['--max_model_len', '4096'],
  ['--hf-token'],
  ['--hf-token', 'x', '--enforce-eager'],
  ['-tp', '2', '-tp=2', '-O3', '-O', '3', '-q', 'awq'],
  ['--compilation-config.mode', '3', '-cc.mode=3'],
  ['--compilation-config.custom_ops+', '-rms_norm,+silu_and_mul'],
  ['--chat-template', ' {{ messages }}'],
  ['true'],
  ['-1'],
  [''],
  ['--enforce-eager', 'true'],
  ['--enforce-eager', '-1'],
  ['--enforce-eager=true'],
  ['-ep', 'true'],
  [' --max-model-len=4096'],
  ['--max-num-seqs=8', '8'],
  ['--max-num-seqs', '8', '9'],
  ['--hf-token', 'x', 'y'],
  ['--lora-modules=a=/x', 'b=/y'],
  ['-O3', 'x'],
  ['-cc.mode=3', 'x'],
  ['--limit-mm-per-prompt.image', '2', 'x'],
  ['--seed', '-1.5'],
  ['--max-model-len', '4096', '--', 'x'],
];

let table: ReturnType<typeof readVllmFlags> | undefined;
const fromVllm = () => (table ??= readVllmFlags(python, CASES));

describe('the vLLM flag table', () => {
  it.skipIf(missing)(
    `is what the installed vLLM's parser says${skipped}`,
    () => {
      const { vllm, flags } = fromVllm();
      expect({ vllm: VLLM_FLAGS_VERSION, flags: VLLM_FLAG_VALUES }).toEqual({ vllm, flags });
      expect(readFileSync(new URL(`../../${VLLM_FLAGS_FILE}`, import.meta.url), 'utf8')).toBe(
        vllmFlagsSource(fromVllm()),
      );
    },
    300_000,
  );

  it.skipIf(missing)(
    `lets the spec parser accept and refuse engine.args as the installed vLLM does${skipped}`,
    () => {
      const tried = fromVllm().tried!;
      const accepted = (args: string[]) =>
        safeParseServedModel({ ...minimalHf, spec: { ...minimalHf.spec, engine: { args } } }).ok;
      // vLLM's message on both sides, to read beside a case the two judge differently.
      expect(CASES.map((args, i) => ({ args, accepted: accepted(args), vllm: tried[i] }))).toEqual(
        CASES.map((args, i) => ({ args, accepted: tried[i] === null, vllm: tried[i] })),
      );
    },
    300_000,
  );
});
