// The weights' source, for the model and for each LoRA adapter: a Hugging Face repository, a checkpoint on a volume,
// objects under a prefix of an S3-compatible bucket, or an OCI artifact in a registry.
// Pure (no Node): it is bundled into workflow code.
import { z } from 'zod';
import {
  HF_MODEL_ID,
  HF_MODEL_ID_MAX,
  jsonRule,
  mustBe,
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

// An S3 bucket name as the stores accept it: 3 to 63 lower-case letters, digits, dots and hyphens (S3-compatible stores
// also take underscores), starting and ending with a letter or digit.
const BUCKET = /^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$/;
// An http(s) origin with no path, query or credentials: https://s3.eu-west-1.amazonaws.com, http://minio.storage:9000.
const ENDPOINT = /^https?:\/\/[A-Za-z0-9.-]+(?::[0-9]{1,5})?\/?$/;
const REGION = /^[a-z0-9-]{1,32}$/;

const s3SourceSchema = strict({
  bucket: rules(z.string(), (v) =>
    BUCKET.test(v)
      ? undefined
      : `must be a bucket name of 3 to 63 lower-case letters, digits, dots, hyphens or underscores, starting and ending with a letter or digit, got ${quote(v)}`,
  )
    .meta(jsonRule(BUCKET))
    .describe('The bucket that holds the checkpoint.'),
  prefix: rules(z.string(), (v) =>
    CLAIM_PATH.test(v.replace(/\/$/, ''))
      ? undefined
      : `must be a key prefix like checkpoints/run-42/step-1000 (no leading "/", no empty, "." or ".." parts), got ${quote(v)}`,
  )
    .default('')
    .describe(
      'The checkpoint\'s "directory": the objects whose keys start with <prefix>/, written under their key\'s rest; empty: the whole bucket.',
    ),
  endpoint: rules(z.string(), (v) =>
    ENDPOINT.test(v)
      ? undefined
      : `must be an http(s) URL of the store with no path, like https://s3.eu-west-1.amazonaws.com or http://minio.storage:9000, got ${quote(v)}`,
  )
    .meta(jsonRule(ENDPOINT))
    .optional()
    .describe(
      "The store's URL, for S3-compatible stores; none: AWS S3 in the region (https://s3.<region>.amazonaws.com).",
    ),
  region: rules(z.string(), (v) =>
    REGION.test(v) ? undefined : `must be a region name like us-east-1, got ${quote(v)}`,
  )
    .meta(jsonRule(REGION))
    .default('us-east-1')
    .describe('The region that requests are signed for (S3-compatible stores mostly take us-east-1).'),
  addressing: z
    .enum(['path', 'virtual'], { error: mustBe('path', 'virtual') })
    .default('path')
    .describe(
      'path: <endpoint>/<bucket>/<key>, which S3-compatible stores want; virtual: <bucket>.<endpoint host>/<key>.',
    ),
  credentialsSecret: strict({
    name: objectName('Secret', 's3-credentials').describe(
      "A Secret in the model's namespace with the keys AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN, optional).",
    ),
  })
    .optional()
    .describe('The credentials; only the puller gets them. None: unsigned requests, for a public bucket.'),
});

// registry[:port]/repository[:tag][@sha256:digest], the repository's parts lower-case (the OCI distribution spec's).
const OCI_REFERENCE =
  /^[A-Za-z0-9.-]+(?::[0-9]{1,5})?\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?$/;

// An absolute directory in an image's filesystem: /models, /opt/weights/qwen.
const IMAGE_PATH = /^\/[A-Za-z0-9._-]+(?:\/[A-Za-z0-9._-]+)*$/;

const ociSourceSchema = strict({
  reference: rules(z.string(), (v) =>
    v.length <= 512 && OCI_REFERENCE.test(v)
      ? undefined
      : `must be an OCI reference with its registry, like registry.example.com/models/qwen:1.0 or …@sha256:<digest>, got ${quote(v)}`,
  )
    .meta(jsonRule(OCI_REFERENCE, { maxLength: 512 }))
    .describe(
      'The artifact or image, with its registry: registry.example.com/models/qwen:1.0, or pinned with @sha256:<digest>. In an artifact, each layer with a file name (org.opencontainers.image.title, as oras push writes it) is one file of the weights; of an image, the files under path.',
    ),
  path: rules(z.string(), (v) =>
    IMAGE_PATH.test(v) && !v.split('/').some((part) => part === '.' || part === '..')
      ? undefined
      : `must be an absolute directory in the image, like /models, got ${quote(v)}`,
  )
    .meta(jsonRule(IMAGE_PATH))
    .optional()
    .describe(
      "For an image: the directory in its filesystem whose files are the weights; none: /models (KServe's modelcar layout). An artifact's files have their own names.",
    ),
  credentialsSecret: strict({
    name: objectName('Secret', 'registry-credentials').describe(
      "A Secret in the model's namespace of type kubernetes.io/dockerconfigjson (its key .dockerconfigjson), as for imagePullSecrets.",
    ),
  })
    .optional()
    .describe("The registry's credentials; only the puller gets them. None: anonymous pulls."),
  plainHttp: z
    .boolean()
    .default(false)
    .describe('Talk to the registry over plain HTTP, for a registry inside the cluster without TLS.'),
});

export type HuggingFaceSource = z.output<typeof huggingFaceSchema>;
export type OciSource = z.output<typeof ociSourceSchema>;
export type PvcSource = z.output<typeof pvcSourceSchema>;
export type S3Source = z.output<typeof s3SourceSchema>;
/** Exactly one of `huggingface`, `pvc`, `s3` or `oci`. */
export type SourceSpec =
  | { huggingface: HuggingFaceSource; pvc?: undefined; s3?: undefined; oci?: undefined }
  | { pvc: PvcSource; huggingface?: undefined; s3?: undefined; oci?: undefined }
  | { s3: S3Source; huggingface?: undefined; pvc?: undefined; oci?: undefined }
  | { oci: OciSource; huggingface?: undefined; pvc?: undefined; s3?: undefined };

const SOURCES =
  'huggingface (a model repository), pvc (a checkpoint on a volume), s3 (objects in a bucket) or oci (an artifact in a registry)';

export const sourceSchema = strict({
  huggingface: huggingFaceSchema.optional().describe('A model repository on the Hugging Face Hub.'),
  pvc: pvcSourceSchema
    .optional()
    .describe("A checkpoint already on a volume; the puller copies it into the model's own volume."),
  s3: s3SourceSchema
    .optional()
    .describe('A checkpoint in an S3 or S3-compatible bucket: the objects under a prefix, resumed and verified.'),
  oci: ociSourceSchema
    .optional()
    .describe('An OCI artifact in a registry (oras push): its layers are the files, resumed and checked by digest.'),
})
  .superRefine((source, ctx) => {
    const given = [source.huggingface, source.pvc, source.s3, source.oci].filter((s) => s !== undefined).length;
    if (given !== 1) {
      ctx.addIssue({
        code: 'custom',
        message:
          given > 1 ? `give exactly one source, not ${given}: ${SOURCES}` : `give exactly one source: ${SOURCES}`,
      });
    }
  })
  // Exactly one of the fields, which are its only ones, in JSON Schema's words.
  .meta({ minProperties: 1, maxProperties: 1 })
  .transform((source) => source as SourceSpec);
