// Why a claim is not bound yet. The reasons live only in Events (ProvisioningFailed, ExternalProvisioning,
// WaitForFirstConsumer), so both the volume step and the download that waits on the volume read them here.
import type { CoreV1Event, V1PersistentVolumeClaim } from '@kubernetes/client-node';
import type { Cluster } from './cluster/api';
import { classifyVolumeEvents, type PodProblem } from './pod-problems';

/** Events about a claim; best effort (a Role without `events` access only loses detail). */
export async function volumeEvents(cluster: Cluster, namespace: string, name: string): Promise<CoreV1Event[]> {
  return cluster
    .list<CoreV1Event>('v1', 'Event', namespace, {
      fieldSelector: `involvedObject.kind=PersistentVolumeClaim,involvedObject.name=${name}`,
    })
    .catch(() => []);
}

/** Binding waits for the first pod that uses the claim (a WaitForFirstConsumer StorageClass). */
export const bindsOnFirstConsumer = (events: CoreV1Event[]): boolean =>
  events.some((e) => e.reason === 'WaitForFirstConsumer');

const eventTime = (e: CoreV1Event): number => {
  const t = e.lastTimestamp ?? e.eventTime ?? e.firstTimestamp ?? e.metadata?.creationTimestamp;
  return t ? new Date(t as unknown as string).getTime() : 0;
};

/** A warning named by `classifyVolumeEvents`, else `VolumePending` with the latest thing said about the claim. */
export function pendingVolumeProblem(name: string, events: CoreV1Event[]): PodProblem {
  const warning = classifyVolumeEvents(name, events);
  if (warning) return warning;
  const latest = [...events].sort((a, b) => eventTime(b) - eventTime(a))[0];
  return {
    reason: 'VolumePending',
    message: `volume ${name} is not bound yet${latest?.message ? `: ${latest.message}` : ''}`,
    waiting: true,
    pod: '',
  };
}

/** Why the claim is still Pending, or undefined when it is bound (or gone). */
export async function volumeProblem(cluster: Cluster, namespace: string, name: string): Promise<PodProblem | undefined> {
  const pvc = await cluster.get<V1PersistentVolumeClaim>({
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    name,
    namespace,
  });
  if (!pvc || (pvc.status?.phase ?? 'Pending') !== 'Pending') return undefined;
  return pendingVolumeProblem(name, await volumeEvents(cluster, namespace, name));
}
