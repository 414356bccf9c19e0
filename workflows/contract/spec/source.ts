// Source identity: what decides whether weights must be pulled again. Pure.
import type { SourceSpec } from './schema.js';

/** The part of a source that identifies the weights. The token Secret is not part of it: rotating it must not re-pull. */
export type SourceIdentity =
  { kind: 'huggingface'; repo: string; revision: string } | { kind: 'pvc'; claimName: string; path: string };

export function sourceIdentity(source: SourceSpec): SourceIdentity {
  if (source.huggingface) {
    return { kind: 'huggingface', repo: source.huggingface.repo, revision: source.huggingface.revision };
  }
  return { kind: 'pvc', claimName: source.pvc.claimName, path: source.pvc.path };
}

/** True when both sources name the same weights (so an update needs no new download). */
export function sameSource(a: SourceSpec, b: SourceSpec): boolean {
  const x = sourceIdentity(a);
  const y = sourceIdentity(b);
  return x.kind === 'huggingface' && y.kind === 'huggingface'
    ? x.repo === y.repo && x.revision === y.revision
    : x.kind === 'pvc' && y.kind === 'pvc' && x.claimName === y.claimName && x.path === y.path;
}

/** `huggingface:Qwen/Qwen2.5-0.5B-Instruct@main` or `pvc:checkpoints/run-42/step-1000`; never contains a secret. */
export function describeSource(source: SourceSpec): string {
  const identity = sourceIdentity(source);
  return identity.kind === 'huggingface'
    ? `huggingface:${identity.repo}@${identity.revision}`
    : `pvc:${identity.claimName}${identity.path ? `/${identity.path}` : ''}`;
}
