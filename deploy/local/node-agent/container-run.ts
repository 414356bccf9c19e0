// One container of a pod as the kubelet runs it: each run launched as a process, restarted per the pod's restart
// policy with the kubelet's back-off (CrashLoopBackOff), and ErrImagePull for an image the agent has no runtime for.
import { existsSync } from 'node:fs';
import { launchOf } from './container-launch.js';
import { probeRun } from './container-probes.js';
import type { ImageRuntime } from './images.js';
import { now, sleep, type PodContext, type Run, type Slot } from './pod-context.js';
import { terminatedState } from './pod-status.js';
import { ContainerProcess } from './sandbox.js';

export const BACKOFF_START_S = 10;
const BACKOFF_MAX_S = 300;
/** A container that ran this long without failing starts its back-off anew. */
const BACKOFF_RESET_MS = 10 * 60_000;

/** One container of the pod, run after run until its restart policy or the pod's end stops it. */
export async function runSlot(ctx: PodContext, slot: Slot, volumes: Map<string, string>): Promise<void> {
  const name = slot.spec.name;
  const image = ctx.host.images[slot.spec.image ?? ''];
  if (!image || !existsSync(image.requires)) {
    await imageMissing(ctx, slot, image);
    return;
  }
  while (!ctx.stopping()) {
    const prepared = await launchOf(ctx, slot, image, volumes);
    if ('reason' in prepared) {
      if (slot.waiting?.message !== prepared.message) {
        ctx.host.event(ctx.pod(), 'Warning', 'Failed', `Error: ${prepared.message}`);
      }
      slot.waiting = prepared;
      ctx.writeStatus();
      await sleep(10_000, ctx.signal);
      continue;
    }
    if (slot.restartCount === 0) {
      ctx.host.event(ctx.pod(), 'Normal', 'Pulled', `Container image "${slot.spec.image}" already present on machine`);
    }
    const proc = new ContainerProcess(prepared.launch);
    const run: Run = { proc, startedAt: now(), started: false, ready: false, logFile: prepared.launch.logFile };
    slot.run = run;
    slot.waiting = undefined;
    ctx.host.event(ctx.pod(), 'Normal', 'Created', `Created container: ${name}`);
    ctx.host.event(ctx.pod(), 'Normal', 'Started', `Started container ${name}`);
    ctx.writeStatus();
    const probing = probeRun(ctx, slot, run);
    const exit = await proc.exited;
    await probing;
    await proc.cleanUp();
    const terminated = terminatedState(ctx.uid, slot, run, exit, prepared.launch.terminationFile);
    slot.run = undefined;
    if (exit.startError)
      ctx.host.log('container did not start', { pod: ctx.key(), container: name, error: exit.startError });
    const policy = ctx.pod().spec?.restartPolicy ?? 'Always';
    if (ctx.stopping() || policy === 'Never' || (policy === 'OnFailure' && terminated.exitCode === 0)) {
      slot.final = terminated;
      ctx.writeStatus();
      return;
    }
    slot.lastTerminated = terminated;
    const ranMs =
      Date.parse(terminated.finishedAt as unknown as string) - Date.parse(terminated.startedAt as unknown as string);
    if (ranMs > BACKOFF_RESET_MS) slot.backoffS = BACKOFF_START_S;
    const wait = slot.backoffS;
    slot.backoffS = Math.min(BACKOFF_MAX_S, slot.backoffS * 2);
    slot.restartCount++;
    const pod = ctx.pod().metadata!;
    slot.waiting = {
      reason: 'CrashLoopBackOff',
      message: `back-off ${wait}s restarting failed container=${name} pod=${pod.name}_${pod.namespace}(${ctx.uid})`,
    };
    ctx.host.event(
      ctx.pod(),
      'Warning',
      'BackOff',
      `Back-off restarting failed container ${name} in pod ${pod.name}_${pod.namespace}(${ctx.uid})`,
    );
    ctx.writeStatus();
    await sleep(wait * 1000, ctx.signal);
  }
}

/** An image with no local runtime: the pull fails, then backs off, for as long as the pod lives. */
async function imageMissing(ctx: PodContext, slot: Slot, image: ImageRuntime | undefined): Promise<void> {
  const ref = slot.spec.image ?? '';
  const why = image
    ? `the local runtime for it is not installed (${image.install} installs it)`
    : `not found: the local node agent has no runtime for this image (deploy/local/node-agent/images.ts)`;
  slot.waiting = {
    reason: 'ErrImagePull',
    message: `rpc error: code = NotFound desc = failed to pull and unpack image "${ref}": ${why}`,
  };
  ctx.host.event(ctx.pod(), 'Normal', 'Pulling', `Pulling image "${ref}"`);
  ctx.host.event(ctx.pod(), 'Warning', 'Failed', `Failed to pull image "${ref}": ${slot.waiting.message}`);
  ctx.host.event(ctx.pod(), 'Warning', 'Failed', 'Error: ErrImagePull');
  ctx.writeStatus();
  await sleep(2_000, ctx.signal);
  if (ctx.stopping()) return;
  slot.waiting = { reason: 'ImagePullBackOff', message: `Back-off pulling image "${ref}"` };
  ctx.host.event(ctx.pod(), 'Normal', 'BackOff', `Back-off pulling image "${ref}"`);
  ctx.host.event(ctx.pod(), 'Warning', 'Failed', 'Error: ImagePullBackOff');
  ctx.writeStatus();
  await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
}
