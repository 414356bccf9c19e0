// The weights' source, for the model and for each LoRA adapter: a Hugging Face repository or a checkpoint on a volume.
// Pure (no Node): it is bundled into workflow code.
import { z } from 'zod';
import { HF_REPO, objectName, quote, revisionProblem, rules, secretRef, strict } from './rules.js';

// rules.ts builds the reference; its fields get their descriptions (JSON Schema, docs/spec.md) here.
export function describedSecretRef(example: string) {
  const ref = secretRef(example);
  ref.shape.name.register(z.globalRegistry, { description: "The name of a Secret in the model's namespace." });
  ref.shape.key.register(z.globalRegistry, { description: 'The key of that Secret that holds the value.' });
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
      v.length <= 96 && HF_REPO.test(v) && !/--|\.\./.test(v)
        ? undefined
        : `must be a Hugging Face model id like Qwen/Qwen2.5-0.5B-Instruct, got ${quote(v)}`,
  ).describe('The model id on the Hugging Face Hub, like Qwen/Qwen2.5-0.5B-Instruct (not a URL).'),
  revision: rules(z.string(), (v) => {
    const problem = revisionProblem(v);
    return problem
      ? `must be a branch, tag or commit of the repository (like main, v1.2, refs/pr/1 or a commit sha), got ${quote(v)}: ${problem}`
      : undefined;
  })
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
    if (v === '') return undefined;
    if (v.startsWith('/')) return `must be relative to the root of the claim, like run-42/step-1000, got ${quote(v)}`;
    const parts = v.split('/');
    return parts.some((part) => part === '' || part === '.' || part === '..' || part.includes('\0'))
      ? `must be a plain relative path without empty, "." or ".." parts, like run-42/step-1000, got ${quote(v)}`
      : undefined;
  })
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
  .transform((source) => source as SourceSpec);
