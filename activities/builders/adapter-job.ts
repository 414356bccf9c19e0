// The Job that puts a model's LoRA adapters on its volume while the engine serves: one container per adapter, each
// running the puller's program into /models/adapters/<hash8> (a complete directory is skipped at once), and one
// that removes the adapter directories the spec no longer lists. One pod, so one schedule and one deadline; one
// container per adapter, so each adapter's outcome is its own container's exit, and one adapter's failure neither
// stops nor hides the others'.
import type { V1Container, V1Job, V1Volume, V1VolumeMount } from '@kubernetes/client-node';
import { describeSource, durationSeconds, type AdapterSpec, type ServedModel } from '../../workflows/contract/index.js';
import { canonicalJson, sha256Hex } from './hash.js';
import { labelsFor } from './labels.js';
import { objectMeta, type ChildOptions } from './meta.js';
import { childName, pvcName, slotBase } from './names.js';
import { containerSecurityContext, onTheEnginesNode, podScheduling, podSecurityContext } from './pod.js';
import { pullEnv } from './puller-job.js';
import { PULLER_SCRIPT } from './puller-script.js';
import { adapterDir, MODELS_DIR, SOURCE_DIR, sourceHash8 } from './source.js';

/** The container that fetches `adapters[i]`; the pruning one is `prune`. */
export const adapterContainerName = (index: number): string => `adapter-${index}`;
const PRUNE_CONTAINER = 'prune';
const ADAPTERS_DIR = `${MODELS_DIR}/adapters`;

/** The first 8 hex characters of the hash of the adapters' sources (names aside): it names the Job. */
function adapterSetHash8(adapters: readonly AdapterSpec[]): string {
  return sha256Hex(canonicalJson(adapters.map((a) => sourceHash8(a.source)).sort())).slice(0, 8);
}

/** `<name>-adapters-<hash8>`: another set of adapter sources is another Job. */
export function adapterJobName(model: string, adapters: readonly AdapterSpec[]): string {
  return childName(model, `adapters-${adapterSetHash8(adapters)}`);
}

// Removes every entry of /models/adapters that is not a kept adapter's directory (a stale `.partial` included).
export const PRUNE_SCRIPT = `
import json, os, shutil
root = os.environ['FERRY_ADAPTERS_DIR']
keep = set(os.environ.get('FERRY_KEEP', '').split())
os.makedirs(root, exist_ok=True)
removed = []
for name in sorted(os.listdir(root)):
    if name not in keep:
        path = os.path.join(root, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.remove(path)
        removed.append(name)
print('FERRY_PRUNED ' + json.dumps({'removed': removed}), flush=True)
`;

/**
 * The adapter Job, `<name>-adapters-<hash8>`: `adapter-<i>` fetches `engine.lora.adapters[i]`, `prune` removes what is
 * no longer listed. `backoffLimit: 0`: each container's exit is that adapter's outcome, read once; the workflow tries
 * a failed adapter again with a new Job. Ends by `puller.deadline`.
 */
export function buildAdapterJob(model: ServedModel, options: ChildOptions): V1Job {
  const adapters = model.spec.engine.lora.adapters ?? [];
  const { puller, engine } = model.spec;
  const image = puller.image ?? engine.image;
  const base = slotBase(model.metadata.name, options.slot);
  const volumes: V1Volume[] = [{ name: 'weights', persistentVolumeClaim: { claimName: pvcName(base) } }];
  const containers: V1Container[] = adapters.map((adapter, index) => {
    const mounts: V1VolumeMount[] = [{ name: 'weights', mountPath: MODELS_DIR }];
    if (adapter.source.pvc) {
      volumes.push({
        name: `source-${index}`,
        persistentVolumeClaim: { claimName: adapter.source.pvc.claimName, readOnly: true },
      });
      mounts.push({ name: `source-${index}`, mountPath: SOURCE_DIR, readOnly: true });
    }
    return {
      name: adapterContainerName(index),
      image,
      command: ['python3', '-c', PULLER_SCRIPT],
      // Its siblings are the other adapters: the prune container decides what goes.
      env: pullEnv(
        model,
        adapter.source,
        `${adapter.name} (${describeSource(adapter.source)})`,
        adapterDir(adapter.source),
        [{ name: 'FERRY_PRUNE', value: '0' }],
      ),
      resources: { requests: { cpu: '100m', memory: '256Mi' }, limits: { memory: '2Gi' } },
      securityContext: containerSecurityContext(),
      // A failed container's last lines (its FERRY_ERROR) become its status message: no log access needed.
      terminationMessagePolicy: 'FallbackToLogsOnError',
      volumeMounts: mounts,
    };
  });
  containers.push({
    name: PRUNE_CONTAINER,
    image,
    command: ['python3', '-c', PRUNE_SCRIPT],
    env: [
      { name: 'FERRY_ADAPTERS_DIR', value: ADAPTERS_DIR },
      { name: 'FERRY_KEEP', value: adapters.map((a) => sourceHash8(a.source)).join(' ') },
    ],
    resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { memory: '256Mi' } },
    securityContext: containerSecurityContext(),
    terminationMessagePolicy: 'FallbackToLogsOnError',
    volumeMounts: [{ name: 'weights', mountPath: MODELS_DIR }],
  });
  const { affinity: _user, ...scheduling } = podScheduling(model);
  const affinity = onTheEnginesNode(model, options.slot);
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: objectMeta(model, 'adapters', adapterJobName(base, adapters), {
      rootUid: options.rootUid,
    }),
    spec: {
      activeDeadlineSeconds: durationSeconds(puller.deadline),
      backoffLimit: 0,
      template: {
        metadata: { labels: labelsFor(model, 'adapters') },
        spec: {
          restartPolicy: 'Never',
          enableServiceLinks: false,
          automountServiceAccountToken: false,
          securityContext: podSecurityContext(),
          ...scheduling,
          ...(affinity ? { affinity } : {}),
          containers,
          volumes,
        },
      },
    },
  };
}
