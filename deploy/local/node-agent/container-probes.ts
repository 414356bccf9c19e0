// A run's startup, readiness and liveness probes, wired as the kubelet wires them: readiness and liveness begin once
// startup passes; readiness sets the container's Ready, a failed startup or liveness probe kills the run for a restart.
import { sleep, type PodContext, type Run, type Slot } from './pod-context.js';
import { runProbe } from './probes.js';

/** The container's startup, readiness and liveness probes for one run. */
export async function probeRun(ctx: PodContext, slot: Slot, run: Run): Promise<void> {
  const { startupProbe, readinessProbe, livenessProbe } = slot.spec;
  const ip = ctx.address()!.ip;
  const alive = () => !ctx.stopping() && slot.run === run && !run.killedBy;
  let ended = false;
  void run.proc.exited.then(() => (ended = true));
  const live = () => alive() && !ended;
  const every = async (
    probe: NonNullable<typeof startupProbe>,
    kind: string,
    onResult: (ok: boolean, message?: string) => boolean,
  ) => {
    await sleep((probe.initialDelaySeconds ?? 0) * 1000, ctx.signal);
    while (live()) {
      const result = await runProbe(probe, slot.spec, ip);
      if (!live()) return;
      if (!result.ok)
        ctx.host.event(ctx.pod(), 'Warning', 'Unhealthy', `${kind} probe failed: ${result.message ?? ''}`);
      if (onResult(result.ok, result.message)) return;
      await Promise.race([sleep((probe.periodSeconds ?? 10) * 1000, ctx.signal), run.proc.exited]);
    }
  };
  const kill = (why: string) => {
    run.killedBy = why;
    ctx.host.event(ctx.pod(), 'Normal', 'Killing', `Container ${slot.spec.name} ${why}, will be restarted`);
    void run.proc.stop((ctx.pod().spec?.terminationGracePeriodSeconds ?? 30) * 1000);
  };
  if (startupProbe) {
    let failures = 0;
    await every(startupProbe, 'Startup', (ok) => {
      if (ok) return (run.started = true);
      if (++failures >= (startupProbe.failureThreshold ?? 3)) {
        kill('failed startup probe');
        return true;
      }
      return false;
    });
  } else {
    run.started = true;
  }
  if (!run.started || !live()) return;
  ctx.writeStatus();
  const readiness = readinessProbe
    ? (() => {
        let failures = 0;
        let successes = 0;
        return every(readinessProbe, 'Readiness', (ok) => {
          if (ok) {
            failures = 0;
            if (++successes >= (readinessProbe.successThreshold ?? 1) && !run.ready) {
              run.ready = true;
              ctx.writeStatus();
            }
          } else {
            successes = 0;
            if (++failures >= (readinessProbe.failureThreshold ?? 3) && run.ready) {
              run.ready = false;
              ctx.writeStatus();
            }
          }
          return false;
        });
      })()
    : Promise.resolve().then(() => {
        run.ready = true;
        ctx.writeStatus();
      });
  const liveness = livenessProbe
    ? (() => {
        let failures = 0;
        return every(livenessProbe, 'Liveness', (ok) => {
          failures = ok ? 0 : failures + 1;
          if (failures >= (livenessProbe.failureThreshold ?? 3)) {
            kill('failed liveness probe');
            return true;
          }
          return false;
        });
      })()
    : Promise.resolve();
  await Promise.all([readiness, liveness]);
}
