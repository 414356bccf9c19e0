// Why a claim is not bound yet. The reasons live only in Events (ProvisioningFailed, ExternalProvisioning,
// WaitForFirstConsumer), so both the volume step and the download that waits on the volume read them here.
import type { CoreV1Event } from '@kubernetes/client-node';
import { classifyVolumeEvents, type PodProblem } from './pod-problems.js';
import { eventTime } from './time.js';

/** Binding waits for the first pod that uses the claim (a WaitForFirstConsumer StorageClass). */
export const bindsOnFirstConsumer = (events: CoreV1Event[]): boolean =>
  events.some((e) => e.reason === 'WaitForFirstConsumer');

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
