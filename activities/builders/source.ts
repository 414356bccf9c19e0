import { describeSource, sourceIdentity, type SourceSpec } from '../../workflows/contract/index.js';
import { canonicalJson, sha256Hex } from './hash.js';
import { ANNOTATION_SOURCE, ANNOTATION_SOURCE_HASH } from './labels.js';

/** Where the model's volume is mounted; each source's weights live in `<MODELS_DIR>/<hash8>`. */
export const MODELS_DIR = '/models';
/** Where the puller mounts a `pvc` source's claim (read-only). */
export const SOURCE_DIR = '/source';

/** sha256 (hex) of the canonical JSON of the source identity; the token Secret is not part of it. */
export function sourceHash(source: SourceSpec): string {
  return sha256Hex(canonicalJson(sourceIdentity(source)));
}

/** The first 8 hex characters of `sourceHash`: in Job names and weight directories. */
export function sourceHash8(source: SourceSpec): string {
  return sourceHash(source).slice(0, 8);
}

/** The directory on the volume that holds this source's weights, e.g. `/models/1a2b3c4d`. */
export function weightsDir(source: SourceSpec): string {
  return `${MODELS_DIR}/${sourceHash8(source)}`;
}

/** The directory on the volume that holds a LoRA adapter's files, e.g. `/models/adapters/5e6f7a8b`. */
export function adapterDir(source: SourceSpec): string {
  return `${MODELS_DIR}/adapters/${sourceHash8(source)}`;
}

export function sourceAnnotations(source: SourceSpec): Record<string, string> {
  return { [ANNOTATION_SOURCE_HASH]: sourceHash(source), [ANNOTATION_SOURCE]: describeSource(source) };
}
