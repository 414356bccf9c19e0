// Local runs only: a front pod's life as the kubelet keeps it, for the supervisor that plays it with HAProxy. A real
// front pod that is deleted stays in the API (Terminating) while its HAProxy finishes what it holds, and goes when the
// process has exited; KWOK would delete it at once (deploy/local/kwok/pod-stages.yaml waits for no finalizer). So the
// supervisor holds each front pod it plays with a finalizer of its own, and lets it go when its HAProxy has exited.
import { PatchStrategy, setHeaderOptions, type CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import type { FrontProxy } from './front-proxy.js';

/**
 * Held on a front pod while the supervisor's HAProxy for it runs. Each supervisor holds a finalizer of its own: a
 * test's supervisor plays the same pods as the local stack's, and either letting go must not free the other's.
 */
export const FRONT_FINALIZER = 'sim.ferry.dev/front-process';

/** A front pod the supervisor plays with HAProxy. */
export interface RunningFront {
  uid: string;
  proxy: FrontProxy;
  model: string;
  namespace: string;
  pod: string;
  /** The pod's preStop pause (`sleep N`): how long it still takes connections once it is being deleted. */
  preStopMs: number;
  /** How long HAProxy may take to finish what it holds after the pause before it is killed (the pod's grace). */
  graceMs: number;
}

export const log = (msg: string, extra: Record<string, unknown> = {}) =>
  process.stderr.write(
    `${JSON.stringify({ time: new Date().toISOString(), component: 'engine-sim-supervisor', msg, ...extra })}\n`,
  );

/** The pause of a container's preStop hook `sleep N`, in ms; 0 without one. */
export function preStopPauseMs(pod: V1Pod): number {
  const command = pod.spec?.containers?.[0]?.lifecycle?.preStop?.exec?.command ?? [];
  const seconds = command[0] === 'sleep' ? Number(command[1]) : 0;
  return Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : 0;
}

/** How long the pod's process has after its preStop pause before it is killed: its grace period, less the pause. */
export function stopGraceMs(pod: V1Pod): number {
  const grace = (pod.spec?.terminationGracePeriodSeconds ?? 30) * 1000;
  return Math.max(1000, grace - preStopPauseMs(pod));
}

/**
 * Holds the pod in the API until `release`: it may already be deleted (no finalizer can be added then), and then it
 * goes as KWOK deletes it.
 */
export async function hold(core: CoreV1Api, pod: V1Pod, finalizer = FRONT_FINALIZER): Promise<void> {
  const { name, namespace } = pod.metadata as { name: string; namespace: string };
  await core
    .patchNamespacedPod(
      { name, namespace, body: { metadata: { finalizers: [finalizer] } } },
      setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
    )
    .catch((err: unknown) => log('front pod not held', { pod: `${namespace}/${name}`, error: String(err) }));
}

/** Lets the pod go (gone already: nothing to do); gives up after 5 s (an API server that is stopped or frozen). */
export async function release(
  core: CoreV1Api,
  namespace: string,
  name: string,
  finalizer = FRONT_FINALIZER,
): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const giveUp = new Promise<void>((resolve) => (timer = setTimeout(resolve, 5_000)));
  const patched = core
    .patchNamespacedPod(
      { name, namespace, body: { metadata: { '$deleteFromPrimitiveList/finalizers': [finalizer] } } },
      setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
    )
    .then(
      () => undefined,
      (err: unknown) => {
        if (String(err).includes('404')) return;
        log('front pod not let go', { pod: `${namespace}/${name}`, error: String(err) });
      },
    );
  await Promise.race([patched, giveUp]);
  clearTimeout(timer);
}

/**
 * Lets go every deleted front pod held by a supervisor that no longer plays it (one that stopped or restarted):
 * `pods` are the front pods as listed, `playing` the uids of those this one still plays or is stopping.
 */
export async function releaseStrays(
  core: CoreV1Api,
  pods: V1Pod[],
  playing: Set<string>,
  finalizer = FRONT_FINALIZER,
): Promise<void> {
  for (const pod of pods) {
    const held = pod.metadata?.finalizers?.includes(finalizer);
    if (!held || !pod.metadata?.deletionTimestamp || playing.has(pod.metadata.uid ?? '')) continue;
    await release(core, pod.metadata.namespace!, pod.metadata.name!, finalizer);
  }
}
