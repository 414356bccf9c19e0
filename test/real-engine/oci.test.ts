// examples/oci.yaml on the real engine: the puller reads the tiny Llama's artifact from the local registry (the CNCF
// distribution registry) with the credentials of a docker-config Secret, checks every layer by its digest, and a real
// vLLM serves it. Ferry's worker and CLI are the same as everywhere.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { beforeAll, describe, expect, it } from 'vitest';
import type { ModelStatus } from '../../workflows/contract/index.js';
import { expectOk, ferryJson, uniqueCluster } from '../support/e2e.js';
import { spawnFerry, writeDoc } from '../support/ferry-worker.js';
import { RESTRICTED, useNamespace, useWorkerProcesses } from '../support/fixtures.js';
import { repoRoot } from '../support/local-env.js';
import type { Doc } from '../support/workflow-harness.js';
import { completionTokens, realEngineMissing, REGISTRY, registryAuth, registryServed, repoBytes } from './support.js';

const missing = realEngineMissing();
const kube = useNamespace('real-oci', RESTRICTED);
const startWorkerProcess = useWorkerProcesses();
const cluster = uniqueCluster('real-oci');
const NAME = 'tiny-oci';

beforeAll(async () => {
  if (missing) return;
  await startWorkerProcess(cluster);
  // The Secret the example names, as the local stack makes it in namespace models.
  const auth = registryAuth();
  const basic = Buffer.from(`${auth.username}:${auth.password}`).toString('base64');
  await kube.core.createNamespacedSecret({
    namespace: kube.ns,
    body: {
      metadata: { name: 'local-registry' },
      type: 'kubernetes.io/dockerconfigjson',
      stringData: { '.dockerconfigjson': JSON.stringify({ auths: { [REGISTRY]: { ...auth, auth: basic } } }) },
    },
  });
}, 180_000);

describe.skipIf(missing)(`examples/oci.yaml on the real engine${missing ? ` (skipped: ${missing})` : ''}`, () => {
  it('serves the model from the registry: every layer downloaded once and checked, then a real vLLM answers', async () => {
    const served = async () =>
      Object.values(await registryServed('ferry-local/tiny-llama')).reduce((sum, n) => sum + n, 0);
    const before = await served();
    const doc = parseYaml(readFileSync(join(repoRoot, 'examples/oci.yaml'), 'utf8')) as Doc;
    doc.metadata.namespace = kube.ns;
    doc.spec.cluster = cluster;
    doc.spec.engine.startupTimeout = '10m';
    expectOk(await spawnFerry(['serve', '-f', writeDoc(doc), '--wait', '--timeout', '9m']).exited, 'ferry serve');

    const status = await ferryJson<ModelStatus>(['status', NAME, '-n', kube.ns, '--cluster', cluster]);
    const size = repoBytes('ferry-local/tiny-llama', 'v1');
    expect(status.phase).toBe('Ready');
    expect(status.source).toBe(`oci://${REGISTRY}/ferry-local/tiny-llama:v1`);
    expect(status.download).toMatchObject({ state: 'Complete', bytes: size });
    expect((await served()) - before).toBe(size);

    expect(await completionTokens(status.endpoint!, NAME)).toBeGreaterThan(0);
  });
});
