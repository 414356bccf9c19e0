// Two workers on one cluster share the watch's wakes by the namespace's Lease (FERRY_WATCH_LEASE=on, as the chart runs
// them). This kills the Lease's holder with SIGKILL and, in the same moment, changes every model: each model's Service
// is deleted. The survivor must take the Lease over (within 15 s), then wake every model whose Service went (none
// missed) and each once (none doubled). A round before the kill, with both workers alive, is the control.
//
//   npm run bench:worker-loss -- [--models 100] [--parallel 10] [--deadline 2m] [--keep]
//
// Per round: how long until every Service was back and, per model, the repairs in its timeline and the
// `ferry.modelChanged` signals after the change with the workers they came from. Missed: a model whose Service was not
// re-applied within --deadline (its next look is 6 h away, so only a wake repairs it). Doubled: a model repaired more
// than once for the one change, or woken by both workers for it. Real: Temporal, the API server, both worker
// processes; simulated: KWOK's pods and the engine stand-in (instant stages).
import { CoordinationV1Api, CoreV1Api } from '@kubernetes/client-node';
import { parseArgs } from 'node:util';
import { getModelStatus } from '../client/index.js';
import { serveModel } from '../client/serve-model.js';
import { parseDuration, workflowIdFor, type ModelRef } from '../workflows/contract/index.js';
import {
  adminKubeConfig,
  createNamespace,
  deleteModels,
  deleteNamespace,
  ensureGpuNodes,
  inParallel,
  instantModel,
  localEnv,
  machine,
  removeGpuNodes,
  sleep,
  startWorker,
  temporalClient,
  uniqueName,
  type BenchWorker,
} from './lib.js';

const { values } = parseArgs({
  options: {
    models: { type: 'string', default: '100' },
    parallel: { type: 'string', default: '10' },
    deadline: { type: 'string', default: '2m' },
    keep: { type: 'boolean', default: false },
  },
});
const models = Number(values.models);
if (!Number.isInteger(models) || models < 1)
  throw new Error(`--models must be a whole number ≥ 1, not ${values.models}`);
const deadlineMs = parseDuration(values.deadline);

const kc = adminKubeConfig();
const core = kc.makeApiClient(CoreV1Api);
const leases = kc.makeApiClient(CoordinationV1Api);
const client = await temporalClient();
const cluster = uniqueName('bench-loss');
const namespace = cluster;
const refs: ModelRef[] = Array.from({ length: models }, (_, i) => ({
  cluster,
  namespace,
  name: `m${String(i).padStart(3, '0')}`,
}));
const log = (msg: string) => process.stderr.write(`[bench] ${new Date().toISOString()} ${msg}\n`);

/** The Lease's holder, as the worker names itself (`<host>-<pid>-<hex>`), or undefined while none holds it. */
async function holder(): Promise<string | undefined> {
  const lease = await leases.readNamespacedLease({ name: `ferry-watch-${cluster}`, namespace }).catch(() => undefined);
  return lease?.spec?.holderIdentity ?? undefined;
}

const workerOf = (identity: string, workers: BenchWorker[]) =>
  workers.find((w) => identity.split('-').at(-2) === String(w.child.pid));

interface Round {
  round: string;
  /** From the change until the survivor held the Lease (the kill round only). */
  takeoverS?: number;
  /** From the change until every model's Service was back. */
  allBackS?: number;
  missed: string[];
  doubled: string[];
  /** How many models got how many `ferry.modelChanged` signals after the change. */
  signalsPerModel: Record<string, number>;
  /** Which workers sent them: identity → signals. */
  signalsBy: Record<string, number>;
}

/** Deletes every model's Service at once, then waits for each to be back (re-applied under a new uid). */
async function changeAll(round: string, onChange: () => void = () => undefined): Promise<Omit<Round, 'round'>> {
  const before = new Map<string, string>();
  for (const ref of refs) {
    const svc = await core.readNamespacedService({ name: ref.name, namespace });
    before.set(ref.name, svc.metadata!.uid!);
  }
  const at = Date.now();
  onChange();
  await inParallel(refs, 20, async (ref) => {
    await core.deleteNamespacedService({ name: ref.name, namespace });
  });
  log(`${round}: ${models} Services deleted`);
  const back = new Set<string>();
  let allBackS: number | undefined;
  while (Date.now() - at < deadlineMs) {
    await inParallel(
      refs.filter((r) => !back.has(r.name)),
      20,
      async (ref) => {
        const svc = await core.readNamespacedService({ name: ref.name, namespace }).catch(() => undefined);
        if (svc && svc.metadata?.uid !== before.get(ref.name)) back.add(ref.name);
      },
    );
    if (back.size === models) {
      allBackS = (Date.now() - at) / 1000;
      break;
    }
    await sleep(500);
  }
  log(`${round}: ${back.size}/${models} Services back${allBackS === undefined ? '' : ` in ${allBackS.toFixed(1)} s`}`);
  // Let any late second wake arrive, and be looked at, before counting.
  await sleep(5_000);
  const missed = refs.filter((r) => !back.has(r.name)).map((r) => r.name);
  const doubled: string[] = [];
  const signalsPerModel: Record<string, number> = {};
  const signalsBy: Record<string, number> = {};
  await inParallel(refs, 10, async (ref) => {
    const status = await getModelStatus(client, ref);
    const repairs = status.timeline.filter((e) => e.step === 'repair' && Date.parse(e.startedAt) >= at);
    const history = await client.workflow.getHandle(workflowIdFor(ref)).fetchHistory();
    const from = new Set<string>();
    let signals = 0;
    for (const e of history.events ?? []) {
      const a = e.workflowExecutionSignaledEventAttributes;
      const when = Number(e.eventTime?.seconds ?? 0) * 1000 + Math.floor((e.eventTime?.nanos ?? 0) / 1e6);
      if (a?.signalName !== 'ferry.modelChanged' || when < at) continue;
      signals++;
      from.add(a.identity ?? '');
      signalsBy[a.identity ?? ''] = (signalsBy[a.identity ?? ''] ?? 0) + 1;
    }
    signalsPerModel[String(signals)] = (signalsPerModel[String(signals)] ?? 0) + 1;
    if (repairs.length > 1 || from.size > 1) doubled.push(ref.name);
  });
  return {
    ...(allBackS === undefined ? {} : { allBackS }),
    missed,
    doubled: doubled.sort(),
    signalsPerModel,
    signalsBy,
  };
}

const extraNodes = await ensureGpuNodes(kc, models);
await createNamespace(kc, namespace);
const lease = { FERRY_WATCH_LEASE: 'on' };
const workers = [
  await startWorker(cluster, localEnv().KUBECONFIG, lease),
  await startWorker(cluster, localEnv().KUBECONFIG, lease),
];
const rounds: Round[] = [];
try {
  const start = Date.now();
  let ready = 0;
  await inParallel(refs, Number(values.parallel), async (ref) => {
    await serveModel(client, instantModel(ref.name, namespace, cluster), { wait: true, timeoutMs: 10 * 60_000 });
    if (++ready % 25 === 0 || ready === models) log(`${ready}/${models} Ready`);
  });
  const rampS = Math.round((Date.now() - start) / 1000);
  log(`all ${models} Ready in ${rampS} s`);

  const first = await holder();
  const held = first && workerOf(first, workers);
  if (!first || !held)
    throw new Error(`no worker of this run holds the Lease ferry-watch-${cluster} (holder: ${first})`);
  rounds.push({ round: 'both workers', ...(await changeAll('both workers')) });

  // The kill and the changes at once: the changes fall in the gap before the survivor holds the Lease.
  const survivor = workers.find((w) => w !== held)!;
  let killedAt = 0;
  const takeover = (async () => {
    while (!killedAt) await sleep(50);
    for (;;) {
      const now = await holder();
      if (now && workerOf(now, [survivor])) return (Date.now() - killedAt) / 1000;
      if (Date.now() - killedAt > deadlineMs) return undefined;
      await sleep(250);
    }
  })();
  const killRound = await changeAll('holder killed', () => {
    held.child.kill('SIGKILL');
    killedAt = Date.now();
  });
  const takeoverS = await takeover;
  rounds.push({ round: 'holder killed', ...(takeoverS === undefined ? {} : { takeoverS }), ...killRound });

  const result = {
    bench: 'worker-loss',
    machine: machine(),
    models,
    rampS,
    rounds,
    missed: rounds.reduce((n, r) => n + r.missed.length, 0),
    doubled: rounds.reduce((n, r) => n + r.doubled.length, 0),
  };
  console.log(JSON.stringify(result, null, 2));
} finally {
  for (const w of workers) await w.stop().catch(() => undefined);
  if (!values.keep) {
    const cleaner = await startWorker(cluster, localEnv().KUBECONFIG);
    await deleteModels(client, refs);
    await cleaner.stop();
    await deleteNamespace(kc, namespace);
    await removeGpuNodes(kc, extraNodes);
  }
}
