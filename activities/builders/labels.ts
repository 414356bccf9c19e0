import type { ServedModel } from '../../workflows/contract/index.js';

export const LABEL_NAME = 'app.kubernetes.io/name';
export const LABEL_INSTANCE = 'app.kubernetes.io/instance';
export const LABEL_MANAGED_BY = 'app.kubernetes.io/managed-by';
export const LABEL_COMPONENT = 'app.kubernetes.io/component';
export const LABEL_MODEL = 'ferry.dev/model';

const APP_NAME = 'vllm';
export const MANAGED_BY = 'ferry';

// Annotations, not labels: their values contain '/', which label values may not.
/** Full sha256 of the canonical source identity the object was built for. */
export const ANNOTATION_SOURCE_HASH = 'ferry.dev/source-hash';
/** Human-readable source, like `huggingface:Qwen/Qwen2.5-0.5B-Instruct@main`. */
export const ANNOTATION_SOURCE = 'ferry.dev/source';
/** On the engine's pod template: hash of the rest of the template, for debugging rollouts. */
export const ANNOTATION_SPEC_HASH = 'ferry.dev/spec-hash';
/** On the PVC, under WEIGHTS_FIELD_MANAGER: the source whose weights the volume completely holds. */
export const ANNOTATION_WEIGHTS_SOURCE_HASH = 'ferry.dev/weights-source-hash';
export const ANNOTATION_WEIGHTS_SOURCE = 'ferry.dev/weights-source';
/** On every object: the ID of the model's workflow, so someone starting from kubectl finds it. */
export const ANNOTATION_WORKFLOW_ID = 'ferry.dev/workflow-id';
/** On the Deployment of a model with spec.scaling: the autoscaler's policy, JSON (docs/design/scaling.md). */
export const ANNOTATION_SCALING = 'ferry.dev/scaling';
/** On the root ConfigMap, when the worker knows the Temporal Web UI's URL: the workflow's page. */
export const ANNOTATION_WEB_UI = 'ferry.dev/web-ui';

export type Component =
  'root' | 'storage' | 'puller' | 'adapters' | 'engine' | 'service' | 'admission' | 'pool' | 'network' | 'front';

/** The labels of one of the model's objects: the user's labels, overridden by Ferry's own. */
export function labelsFor(model: ServedModel, component: Component): Record<string, string> {
  const name = model.metadata.name;
  return {
    ...model.metadata.labels,
    [LABEL_NAME]: APP_NAME,
    [LABEL_INSTANCE]: name,
    [LABEL_MANAGED_BY]: MANAGED_BY,
    [LABEL_COMPONENT]: component,
    [LABEL_MODEL]: name,
  };
}

/** The engine Deployment's selector (and the Service's). Immutable in Kubernetes, so it depends on the name only. */
export function selectorLabels(name: string): Record<string, string> {
  return { [LABEL_NAME]: APP_NAME, [LABEL_INSTANCE]: name, [LABEL_COMPONENT]: 'engine' };
}

/** A label selector string for listing every object of a model: `app.kubernetes.io/managed-by=ferry,ferry.dev/model=qwen`. */
export function modelLabelSelector(name: string): string {
  return `${LABEL_MANAGED_BY}=${MANAGED_BY},${LABEL_MODEL}=${name}`;
}

/** True when an object's labels mark it as Ferry's object for this model (the name-claim check). */
export function isOwnedByModel(labels: Record<string, string> | undefined, name: string): boolean {
  return labels?.[LABEL_MANAGED_BY] === MANAGED_BY && labels[LABEL_MODEL] === name;
}
