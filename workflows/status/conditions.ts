// Conditions in Kubernetes' style: one per type, `lastTransitionTime` moves only when `status` changes.
import type { Condition, ModelStatus } from '../contract/index.js';
import { conditionOrder } from '../steps/table.js';

export type ConditionChange = Omit<Condition, 'lastTransitionTime'>;

/** Sets one condition; keeps its transition time when only reason or message change. */
export function setCondition(status: ModelStatus, change: ConditionChange, now: string): ModelStatus {
  const previous = status.conditions.find((c) => c.type === change.type);
  const lastTransitionTime = previous && previous.status === change.status ? previous.lastTransitionTime : now;
  const next: Condition = { ...change, lastTransitionTime };
  if (
    previous &&
    previous.status === next.status &&
    previous.reason === next.reason &&
    previous.message === next.message &&
    previous.observedGeneration === next.observedGeneration
  ) {
    return status;
  }
  const conditions = [...status.conditions.filter((c) => c.type !== change.type), next].sort(
    (a, b) => conditionOrder().indexOf(a.type) - conditionOrder().indexOf(b.type),
  );
  return { ...status, conditions, updatedAt: now };
}
