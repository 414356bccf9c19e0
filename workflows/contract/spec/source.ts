// Source identity: what decides whether weights must be pulled again. Pure.
import type { S3Source, SourceSpec } from './schema.js';

/**
 * The part of a source that identifies the weights. Secrets are not part of it: rotating a token or a key must not
 * re-pull. Neither is how an S3 request is addressed or signed, only where the objects are.
 */
export type SourceIdentity =
  | { kind: 'huggingface'; repo: string; revision: string }
  | { kind: 'pvc'; claimName: string; path: string }
  | { kind: 's3'; endpoint: string; bucket: string; prefix: string }
  | { kind: 'oci'; reference: string; path?: string };

/** The store's URL without a trailing slash: the one given, or AWS S3's in the source's region. */
export function s3Endpoint(s3: S3Source): string {
  return (s3.endpoint ?? `https://s3.${s3.region}.amazonaws.com`).replace(/\/$/, '');
}

export function sourceIdentity(source: SourceSpec): SourceIdentity {
  if (source.huggingface) {
    return { kind: 'huggingface', repo: source.huggingface.repo, revision: source.huggingface.revision };
  }
  if (source.s3) {
    const { bucket, prefix } = source.s3;
    return { kind: 's3', endpoint: s3Endpoint(source.s3), bucket, prefix: prefix.replace(/\/$/, '') };
  }
  if (source.oci) {
    // The path only when it is not the default, so that the identity of an artifact or of an image read at /models is
    // what it was before the field existed.
    const { reference, path } = source.oci;
    return path !== undefined && path !== '/models' ? { kind: 'oci', reference, path } : { kind: 'oci', reference };
  }
  return { kind: 'pvc', claimName: source.pvc.claimName, path: source.pvc.path };
}

/** The Secret through which a source is read (none for a PVC, or a public repository). */
export function sourceSecret(source: SourceSpec): string | undefined {
  return (
    source.huggingface?.tokenSecret?.name ?? source.s3?.credentialsSecret?.name ?? source.oci?.credentialsSecret?.name
  );
}

/** True when both sources name the same weights (so an update needs no new download). */
export function sameSource(a: SourceSpec, b: SourceSpec): boolean {
  const x: Record<string, string> = sourceIdentity(a);
  const y: Record<string, string> = sourceIdentity(b);
  const keys = Object.keys(x);
  return keys.length === Object.keys(y).length && keys.every((k) => x[k] === y[k]);
}

/**
 * `huggingface:Qwen/Qwen2.5-0.5B-Instruct@main`, `pvc:checkpoints/run-42/step-1000`, `s3://bucket/run-42` (AWS),
 * `s3://bucket/run-42@http://minio.storage:9000`, `oci://registry.example.com/models/qwen:1.0` or, for the files under a
 * directory of an image, `oci://registry.example.com/models/qwen:1.0#/weights`; never a secret.
 */
export function describeSource(source: SourceSpec): string {
  const identity = sourceIdentity(source);
  switch (identity.kind) {
    case 'huggingface':
      return `huggingface:${identity.repo}@${identity.revision}`;
    case 'pvc':
      return `pvc:${identity.claimName}${identity.path ? `/${identity.path}` : ''}`;
    case 'oci':
      return `oci://${identity.reference}${identity.path !== undefined ? `#${identity.path}` : ''}`;
    default: {
      const aws = /^https:\/\/s3\.[a-z0-9-]+\.amazonaws\.com$/.test(identity.endpoint);
      return `s3://${identity.bucket}/${identity.prefix}${aws ? '' : `@${identity.endpoint}`}`;
    }
  }
}
