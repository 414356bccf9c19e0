// Turns what Kubernetes says about a pod into one named reason and one line a person can act on. Pure.
import type { CoreV1Event, V1Pod } from '@kubernetes/client-node';
import { FAILURE } from '../../workflows/contract/index.js';
import { eventTime } from './time.js';

export interface PodProblem {
  /** CamelCase: Unschedulable, ImagePullBackOff, CrashLoopBackOff, OOMKilled, MultiAttach, FailedMount, … */
  reason: string;
  message: string;
  /** A waiting state that recovers by itself (no GPU node yet, a volume still attaching): not a failure. */
  waiting: boolean;
  /** The pod it is about. */
  pod: string;
  exitCode?: number;
}

/** Reasons that end a step at once: a retry or more waiting would not change them. */
export const FATAL_POD_REASONS = new Set<string>([
  FAILURE.ImagePullBackOff,
  FAILURE.CrashLoopBackOff,
  FAILURE.OOMKilled,
  'ErrImagePull',
  'InvalidImageName',
  'CreateContainerConfigError',
  'CreateContainerError',
]);

const IMAGE_REASONS = new Set(['ImagePullBackOff', 'ErrImagePull', 'InvalidImageName']);

function oneLine(text: string | undefined, max = 300): string {
  const t = (text ?? '').replace(/\s+/g, ' ').trim();
  return t.length > max ? `${t.slice(0, max - 1)}…` : t;
}

/**
 * The most important problem of a pod, or undefined when it is fine or simply progressing.
 * Order: a container that died (OOMKilled, CrashLoopBackOff, with exit code) beats an image problem beats
 * not being scheduled; `events` (of this pod) add what lives only there: Multi-Attach and mount failures.
 */
export function classifyPod(pod: V1Pod, events: CoreV1Event[] = []): PodProblem | undefined {
  const name = pod.metadata?.name ?? '?';
  const statuses = [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])];

  for (const s of statuses) {
    const term = s.state?.terminated ?? s.lastState?.terminated;
    if (term?.reason === 'OOMKilled') {
      return {
        reason: FAILURE.OOMKilled,
        message: `container ${s.name} of pod ${name} was killed for using more memory than its limit (exit code ${term.exitCode}); raise resources.memory or lower --max-model-len / batch size`,
        waiting: false,
        pod: name,
        exitCode: term.exitCode,
      };
    }
  }
  for (const s of statuses) {
    const waiting = s.state?.waiting;
    if (waiting?.reason === 'CrashLoopBackOff') {
      const last = s.lastState?.terminated;
      const exit = last ? ` with exit code ${last.exitCode}${last.reason ? ` (${last.reason})` : ''}` : '';
      return {
        reason: FAILURE.CrashLoopBackOff,
        message: `container ${s.name} of pod ${name} keeps crashing${exit}, restarted ${s.restartCount} times; see its log`,
        waiting: false,
        pod: name,
        exitCode: last?.exitCode,
      };
    }
    if (waiting?.reason && IMAGE_REASONS.has(waiting.reason)) {
      return {
        reason: FAILURE.ImagePullBackOff,
        message: `image ${s.image} of container ${s.name} cannot be pulled (${waiting.reason}): ${oneLine(waiting.message) || 'check the image name, tag and pull secret'}`,
        waiting: false,
        pod: name,
      };
    }
    if (waiting?.reason === 'CreateContainerConfigError' || waiting?.reason === 'CreateContainerError') {
      return {
        reason: waiting.reason,
        message: `container ${s.name} of pod ${name} cannot be created: ${oneLine(waiting.message)}`,
        waiting: false,
        pod: name,
      };
    }
  }
  if (pod.status?.phase === 'Failed') {
    const term = statuses.map((s) => s.state?.terminated).find((t) => t && t.exitCode !== 0);
    return {
      reason: 'PodFailed',
      message: `pod ${name} failed${term ? ` with exit code ${term.exitCode}${term.reason ? ` (${term.reason})` : ''}` : ''}${pod.status.message ? `: ${oneLine(pod.status.message)}` : ''}`,
      waiting: false,
      pod: name,
      exitCode: term?.exitCode,
    };
  }

  const recent = [...events].sort((a, b) => eventTime(b) - eventTime(a));
  const multiAttach = recent.find((e) => e.reason === 'FailedAttachVolume' && /Multi-Attach/i.test(e.message ?? ''));
  if (multiAttach) {
    return {
      reason: FAILURE.MultiAttach,
      message: `pod ${name} waits for its ReadWriteOnce volume, still attached to another node: ${oneLine(multiAttach.message)}`,
      waiting: true,
      pod: name,
    };
  }
  const mount = recent.find((e) => e.reason === 'FailedMount' || e.reason === 'FailedAttachVolume');
  if (mount) {
    return { reason: mount.reason!, message: `pod ${name}: ${oneLine(mount.message)}`, waiting: true, pod: name };
  }

  const scheduled = pod.status?.conditions?.find((c) => c.type === 'PodScheduled');
  if (scheduled?.status === 'False' && scheduled.reason === 'Unschedulable') {
    return {
      reason: 'Unschedulable',
      message: `pod ${name} waits for a node: ${oneLine(scheduled.message)}`,
      waiting: true,
      pod: name,
    };
  }
  return undefined;
}

/** Warning events about storage that live only in Events: a PVC that cannot be provisioned or bound. */
export function classifyVolumeEvents(pvcName: string, events: CoreV1Event[]): PodProblem | undefined {
  const warn = [...events]
    .filter((e) => e.type === 'Warning')
    .sort((a, b) => eventTime(b) - eventTime(a))
    .find((e) => ['ProvisioningFailed', 'FailedBinding', 'ExternalProvisioning'].includes(e.reason ?? ''));
  if (!warn) return undefined;
  return {
    reason: warn.reason === 'ProvisioningFailed' ? 'ProvisioningFailed' : 'VolumeNotBound',
    message: `volume ${pvcName}: ${oneLine(warn.message)}`,
    waiting: true,
    pod: '',
  };
}
