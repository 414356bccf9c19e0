// An instant serve through Ferry (`ferry serve --wait`, the compiled CLI, a worker of the benchmark's own) against a
// bare kubectl script that issues the same requests in the same order with the same objects (built by Ferry's
// builders): root ConfigMap, PVC, puller Job → wait Complete → delete the Job and wait for its pod to go → Service,
// Deployment → rollout status → GET /health until 200. Alternated A/B, the median ratio is the result.
//
//   npm run bench:serve -- [--trials 10]
//
// Simulated: KWOK pods (the download and the engine's load take 0 s), the engine stand-in. Real: everything else.
import { spawnSync, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { buildAll } from '../activities/builders/index.js';
import { deleteModel } from '../client/delete-model.js';
import { parseServedModel } from '../workflows/contract/index.js';
import {
  adminKubeConfig,
  createNamespace,
  deleteNamespace,
  ensureGpuNodes,
  instantModel,
  localEnv,
  machine,
  percentile,
  removeGpuNodes,
  repoRoot,
  startWorker,
  temporalClient,
  uniqueName,
} from './lib.js';

const { values } = parseArgs({ options: { trials: { type: 'string', default: '10' } } });
const trials = Number(values.trials);
const kubectl = process.env.KUBECTL ?? join(process.env.HOME ?? '/root', '.cache/ferry/bin/kubectl');
const kc = adminKubeConfig();
const env = localEnv();
const client = await temporalClient();
const cluster = uniqueName('ab');
const namespace = cluster;
const dir = mkdtempSync(join(tmpdir(), 'ferry-ab-'));
const log = (msg: string) => process.stderr.write(`[bench] ${new Date().toISOString()} ${msg}\n`);

const extraNodes = await ensureGpuNodes(kc, 2);
await createNamespace(kc, namespace);
const worker = await startWorker(cluster, env.KUBECONFIG);

/** The script: what an operator-less serve is when written by hand with kubectl. */
const SCRIPT = `#!/usr/bin/env bash
set -euo pipefail
k() { "$KUBECTL" --kubeconfig "$KUBECONFIG" -n "$NS" "$@"; }
uid=$(k apply --server-side --field-manager ferry -f "$DIR/root.json" -o jsonpath='{.metadata.uid}')
for f in pvc job; do sed "s/__ROOT_UID__/$uid/g" "$DIR/$f.json" | k apply --server-side --field-manager ferry -f - >/dev/null; done
k wait --for=condition=complete "job/$JOB" --timeout=5m >/dev/null
k delete job "$JOB" --wait=true >/dev/null
k wait --for=delete pod -l "job-name=$JOB" --timeout=5m >/dev/null 2>&1 || true
for f in service deployment; do sed "s/__ROOT_UID__/$uid/g" "$DIR/$f.json" | k apply --server-side --field-manager ferry -f - >/dev/null; done
k rollout status "deployment/$NAME" --timeout=5m >/dev/null
until url=$(node -e 'const e=require(process.argv[1]);const u=e[process.argv[2]];if(!u)process.exit(1);console.log(u)' "$OVERRIDES" "$NS/$NAME" 2>/dev/null) && curl -fsS -o /dev/null "$url/health"; do sleep 0.1; done
`;
writeFileSync(join(dir, 'serve.sh'), SCRIPT, { mode: 0o755 });

function kubectlRun(name: string): number {
  const doc = instantModel(name, namespace, cluster);
  const model = parseServedModel(doc);
  const objects = buildAll(model, { rootUid: '__ROOT_UID__' });
  const mdir = mkdtempSync(join(dir, `${name}-`));
  writeFileSync(join(mdir, 'root.json'), JSON.stringify(objects.root));
  writeFileSync(join(mdir, 'pvc.json'), JSON.stringify(objects.pvc));
  writeFileSync(join(mdir, 'job.json'), JSON.stringify(objects.pullerJob));
  writeFileSync(join(mdir, 'service.json'), JSON.stringify(objects.service));
  writeFileSync(join(mdir, 'deployment.json'), JSON.stringify(objects.deployment));
  const t0 = performance.now();
  const run = spawnSync('bash', [join(dir, 'serve.sh')], {
    env: {
      ...process.env,
      KUBECTL: kubectl,
      KUBECONFIG: env.KUBECONFIG,
      NS: namespace,
      NAME: name,
      DIR: mdir,
      JOB: objects.pullerJob.metadata!.name!,
      OVERRIDES: join(repoRoot, '.ferry/run/endpoints.json'),
    },
    encoding: 'utf8',
  });
  const ms = performance.now() - t0;
  if (run.status !== 0) throw new Error(`the kubectl script failed for ${name}:\n${run.stderr}`);
  // Cleanup, not timed: the root's owner references take everything else with it.
  spawnSync(kubectl, ['--kubeconfig', env.KUBECONFIG, '-n', namespace, 'delete', 'configmap', `${name}-ferry`]);
  return ms;
}

async function ferryRun(name: string): Promise<number> {
  const file = join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify(instantModel(name, namespace, cluster)));
  const t0 = performance.now();
  const code = await new Promise<number | null>((resolve) => {
    const child = spawn(process.execPath, [join(repoRoot, 'bin/ferry.js'), 'serve', '-f', file, '--wait'], {
      env: { ...process.env, TEMPORAL_ADDRESS: env.TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE: 'default' },
      stdio: 'ignore',
    });
    child.on('exit', resolve);
  });
  const ms = performance.now() - t0;
  if (code !== 0) throw new Error(`ferry serve exited ${code} for ${name}`);
  await deleteModel(client, { cluster, namespace, name }, { wait: true });
  return ms;
}

const ferry: number[] = [];
const bare: number[] = [];
try {
  for (let i = 0; i < trials; i++) {
    // Alternate which goes first, so drift in the machine's load hits both alike.
    if (i % 2 === 0) {
      ferry.push(await ferryRun(`f${i}`));
      bare.push(kubectlRun(`k${i}`));
    } else {
      bare.push(kubectlRun(`k${i}`));
      ferry.push(await ferryRun(`f${i}`));
    }
    log(`trial ${i + 1}/${trials}: ferry ${Math.round(ferry.at(-1)!)} ms, kubectl ${Math.round(bare.at(-1)!)} ms`);
  }
  const ratios = ferry.map((f, i) => f / bare[i]!);
  console.log(
    JSON.stringify(
      {
        machine: machine(),
        trials,
        ferryMs: { p50: Math.round(percentile(ferry, 50)), max: Math.round(Math.max(...ferry)) },
        kubectlMs: { p50: Math.round(percentile(bare, 50)), max: Math.round(Math.max(...bare)) },
        medianRatio: Number(percentile(ratios, 50).toFixed(2)),
        ratioOfMedians: Number((percentile(ferry, 50) / percentile(bare, 50)).toFixed(2)),
      },
      null,
      2,
    ),
  );
} catch (err) {
  process.stderr.write(`[bench] failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
} finally {
  await deleteNamespace(kc, namespace);
  await removeGpuNodes(kc, extraNodes);
  await worker.stop();
  await client.connection.close();
}
