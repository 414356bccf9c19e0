import type { Slot } from '../../workflows/contract/index.js';
import { sha256Hex } from './hash.js';

/** The server-side apply field manager for every object Ferry builds. */
export const FIELD_MANAGER = 'ferry';
/** A second field manager that only records, on the PVC, which weights the volume completely holds. */
export const WEIGHTS_FIELD_MANAGER = 'ferry-weights';

/** Kubernetes names that become label values (Job names, Service names) must fit in 63 characters. */
const MAX_NAME_LENGTH = 63;

/**
 * `<parent>-<suffix>`, or, when that is longer than 63 characters, Knative-style: a readable prefix of the parent,
 * a hash of the whole parent and the suffix (`a-very-long-model-name-3f2a1b9c-weights`). Deterministic.
 */
export function childName(parent: string, suffix: string): string {
  const full = `${parent}-${suffix}`;
  if (full.length <= MAX_NAME_LENGTH) return full;
  const hash = sha256Hex(parent).slice(0, 8);
  const room = MAX_NAME_LENGTH - hash.length - suffix.length - 2;
  if (room < 1) {
    // A suffix too long to keep: hash everything, like Knative does.
    return `${full.slice(0, MAX_NAME_LENGTH - 9).replace(/[-.]+$/, '')}-${sha256Hex(full).slice(0, 8)}`;
  }
  return `${parent.slice(0, room).replace(/[-.]+$/, '')}-${hash}-${suffix}`;
}

/** The root ConfigMap every other object of the model is owned by. */
export function rootName(model: string): string {
  return childName(model, 'ferry');
}

/** The volume that holds the model's weights. */
export function pvcName(model: string): string {
  return childName(model, 'weights');
}

/** The Job that pulls one source into the volume; the source hash in the name makes a new source a new Job. */
export function pullerJobName(model: string, sourceHash8: string): string {
  return childName(model, `pull-${sourceHash8}`);
}

/** The ConfigMap holding the admission sidecar's nginx.conf (activities/builders/admission.ts). */
export function admissionConfigMapName(model: string): string {
  return childName(model, 'admission');
}

/** The Deployment and the Service carry the model's own name (a DNS-1035 label of at most 63 characters). */
export function deploymentName(model: string): string {
  return model;
}

export function serviceName(model: string): string {
  return model;
}

/** A model's front (front-objects.ts): its Deployment and ConfigMap. */
export function frontName(model: string): string {
  return childName(model, 'front');
}

/** With a front, the engine pods' own Service (the model's Service selects the front). */
export function engineServiceName(model: string): string {
  return childName(model, 'engine');
}

/**
 * What the engine objects of a revision in `slot` are named after (docs/design/rollout.md, section 2): the model's
 * name in slot `a`, `<name>-b` in slot `b` (its Deployment, Service, volume, puller and admission ConfigMap are those a
 * model of that name would have, and its pods' `app.kubernetes.io/instance` is that name).
 */
export function slotBase(model: string, slot: Slot | undefined): string {
  return slot === 'b' ? childName(model, 'b') : model;
}

/** The engine Service of the revision in `slot` (the front's backend): `<name>-engine` in slot `a`, `<name>-b` in `b`. */
export function slotEngineServiceName(model: string, slot: Slot | undefined): string {
  return slot === 'b' ? serviceName(slotBase(model, slot)) : engineServiceName(model);
}
