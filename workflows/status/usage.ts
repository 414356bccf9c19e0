// GPU-seconds: what a model's ready replicas held, for charge-back. Folded into the status at each change of the GPUs
// held (ready replicas × GPUs per replica), from workflow time, so it costs no timer and no activity: between two
// changes the count grows linearly, and a reader adds `gpus × (now − asOf)`. Pure.
import { usageAt, type ModelStatus } from '../contract/index.js';

/** GPUs the ready replicas hold in `status`; none once the model is deleted. */
function gpusHeld(status: ModelStatus, gpusPerReplica: number): number {
  return status.phase === 'Deleted' ? 0 : status.readyReplicas * gpusPerReplica;
}

/** `next` with its usage brought up to `now` when the GPUs held change; the same object when they do not. */
export function withUsage(previous: ModelStatus, next: ModelStatus, gpusPerReplica: number, now: string): ModelStatus {
  const held = gpusHeld(next, gpusPerReplica);
  const before = previous.usage;
  if (!before) return held === 0 ? next : { ...next, usage: { gpuSeconds: 0, gpus: held, asOf: now } };
  if (held === before.gpus) return next.usage === before ? next : { ...next, usage: before };
  return { ...next, usage: { gpuSeconds: usageAt(before, now), gpus: held, asOf: now } };
}
