// The weights' source, for the model and for each LoRA adapter: a Hugging Face repository or a checkpoint on a volume.
// Pure (no Node): it is bundled into workflow code.
import { z } from 'zod';
import {
  HF_MODEL_ID,
  HF_MODEL_ID_MAX,
  jsonRule,
  objectName,
  quote,
  revisionProblem,
  revisionRule,
  rules,
  secretRef,
  strict,
} from './rules.js';
import { PRINTABLE_CHARACTER } from './text.js';

// A path inside a claim: empty (its root), or relative parts that are neither empty, "." nor "..".
const PART = `(?!\\.\\.?(?:/|$))(?:(?!/)${PRINTABLE_CHARACTER})+`;
const CLAIM_PATH = new RegExp(`^(?:${PART}(?:/${PART})*)?$`, 'u');

// rules.ts builds the reference; its fields get their descriptions (JSON Schema, docs/spec.md) here.
export function describedSecretRef(example: string) {
  const ref = secretRef(example);
  // Registering replaces what the field has: its rule's pattern and bounds are kept beside the description.
  const describe = (field: z.ZodType, description: string) =>
    field.register(z.globalRegistry, { ...z.globalRegistry.get(field), description });
  describe(ref.shape.name, "The name of a Secret in the model's namespace.");
  describe(ref.shape.key, 'The key of that Secret that holds the value.');
  return ref;
}

const huggingFaceSchema = strict({
  repo: rules(
    z.string(),
    (v) =>
      /^https?:\/\//.test(v)
        ? `must be a Hugging Face model id like Qwen/Qwen2.5-0.5B-Instruct, not a URL, got ${quote(v)}`
        : undefined,
    (v) =>
      v.length <= HF_MODEL_ID_MAX && HF_MODEL_ID.test(v)
        ? undefined
        : `must be a Hugging Face model id like Qwen/Qwen2.5-0.5B-Instruct, got ${quote(v)}`,
  )
    .meta(jsonRule(HF_MODEL_ID, { maxLength: HF_MODEL_ID_MAX }))
    .describe('The model id on the Hugging Face Hub, like Qwen/Qwen2.5-0.5B-Instruct (not a URL).'),
  revision: rules(z.string(), (v) => {
    const problem = revisionProblem(v);
    return problem
      ? `must be a branch, tag or commit of the repository (like main, v1.2, refs/pr/1 or a commit sha), got ${quote(v)}: ${problem}`
      : undefined;
  })
    .meta(revisionRule())
    .default('main')
    .describe('A branch, tag or commit of the repository; pin a commit to make re-runs exact.'),
  tokenSecret: describedSecretRef('hf-token')
    .optional()
    .describe('A Secret with a Hugging Face token, only for private or gated repositories; only the puller gets it.'),
});

const pvcSourceSchema = strict({
  claimName: objectName('PersistentVolumeClaim in the same namespace', 'checkpoints').describe(
    "The PersistentVolumeClaim in the model's namespace that holds the checkpoint (not the model's own <name>-weights).",
  ),
  path: rules(z.string(), (v) => {
    if (CLAIM_PATH.test(v)) return undefined;
    return v.startsWith('/')
      ? `must be relative to the root of the claim, like run-42/step-1000, got ${quote(v)}`
      : `must be a plain relative path of printable characters without empty, "." or ".." parts, like run-42/step-1000, got ${quote(v)}`;
  })
    .meta(jsonRule(CLAIM_PATH))
    .default('')
    .describe("The checkpoint's directory relative to the root of the claim, like run-42/step-1000; empty: the root."),
});

export type HuggingFaceSource = z.output<typeof huggingFaceSchema>;
export type PvcSource = z.output<typeof pvcSourceSchema>;
/** Exactly one of `huggingface` or `pvc`. */
export type SourceSpec =
  { huggingface: HuggingFaceSource; pvc?: undefined } | { pvc: PvcSource; huggingface?: undefined };

export const sourceSchema = strict({
  huggingface: huggingFaceSchema.optional().describe('A model repository on the Hugging Face Hub.'),
  pvc: pvcSourceSchema
    .optional()
    .describe("A checkpoint already on a volume; the puller copies it into the model's own volume."),
})
  .superRefine((source, ctx) => {
    if (source.huggingface && source.pvc) {
      ctx.addIssue({
        code: 'custom',
        message:
          'give exactly one source, not both: huggingface (a model repository) or pvc (a checkpoint on a volume)',
      });
    } else if (!source.huggingface && !source.pvc) {
      ctx.addIssue({
        code: 'custom',
        message: 'give exactly one source: huggingface (a model repository) or pvc (a checkpoint on a volume)',
      });
    }
  })
  // Exactly one of the two fields, which are its only ones, in JSON Schema's words.
  .meta({ minProperties: 1, maxProperties: 1 })
  .transform((source) => source as SourceSpec);
