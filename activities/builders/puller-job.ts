import type { V1EnvVar, V1Job, V1Volume, V1VolumeMount } from '@kubernetes/client-node';
import {
  describeSource,
  durationSeconds,
  s3Endpoint,
  type ServedModel,
  type SourceSpec,
} from '../../workflows/contract/index.js';
import { labelsFor } from './labels.js';
import { objectMeta, type ChildOptions } from './meta.js';
import { pullerJobName, pvcName, slotBase } from './names.js';
import { containerEnvVar, containerSecurityContext, podScheduling, podSecurityContext } from './pod.js';
import { PULLER_SCRIPT } from './puller-script.js';
import { MODELS_DIR, SOURCE_DIR, sourceAnnotations, sourceHash8, weightsDir } from './source.js';

export const PULLER_CONTAINER = 'puller';

/**
 * The environment of the puller's program (puller-script.ts) for one pull: `source` into `dest` on the volume,
 * described as `label` in its completion marker; `extra` comes right after FERRY_DEST, the model's `puller.env` last
 * (a Hub mirror's HF_ENDPOINT, a proxy; it may override Ferry's HF_HOME and the like, never FERRY_* or HF_TOKEN).
 */
export function pullEnv(
  model: ServedModel,
  source: SourceSpec,
  label: string,
  dest: string,
  extra: V1EnvVar[] = [],
): V1EnvVar[] {
  const env: V1EnvVar[] = [];
  if (source.huggingface) {
    env.push(
      { name: 'FERRY_SOURCE_KIND', value: 'huggingface' },
      { name: 'FERRY_SOURCE', value: label },
      { name: 'FERRY_HF_REPO', value: source.huggingface.repo },
      { name: 'FERRY_HF_REVISION', value: source.huggingface.revision },
    );
    const token = source.huggingface.tokenSecret;
    if (token) env.push({ name: 'HF_TOKEN', valueFrom: { secretKeyRef: { name: token.name, key: token.key } } });
  } else if (source.s3) {
    const { s3 } = source;
    env.push(
      { name: 'FERRY_SOURCE_KIND', value: 's3' },
      { name: 'FERRY_SOURCE', value: label },
      { name: 'FERRY_S3_ENDPOINT', value: s3Endpoint(s3) },
      { name: 'FERRY_S3_REGION', value: s3.region },
      { name: 'FERRY_S3_BUCKET', value: s3.bucket },
      { name: 'FERRY_S3_PREFIX', value: s3.prefix },
      { name: 'FERRY_S3_ADDRESSING', value: s3.addressing },
    );
    const secret = s3.credentialsSecret?.name;
    if (secret) {
      const key = (name: string, optional = false): V1EnvVar => ({
        name,
        valueFrom: { secretKeyRef: { name: secret, key: name, ...(optional ? { optional } : {}) } },
      });
      env.push(key('AWS_ACCESS_KEY_ID'), key('AWS_SECRET_ACCESS_KEY'), key('AWS_SESSION_TOKEN', true));
    }
  } else if (source.oci) {
    env.push(
      { name: 'FERRY_SOURCE_KIND', value: 'oci' },
      { name: 'FERRY_SOURCE', value: label },
      { name: 'FERRY_OCI_REFERENCE', value: source.oci.reference },
      { name: 'FERRY_OCI_PLAIN_HTTP', value: source.oci.plainHttp ? '1' : '0' },
      ...(source.oci.path !== undefined ? [{ name: 'FERRY_OCI_PATH', value: source.oci.path }] : []),
    );
    const secret = source.oci.credentialsSecret?.name;
    // The docker config's JSON (as for imagePullSecrets), by reference: the puller reads the registry's entry.
    if (secret)
      env.push({ name: 'FERRY_OCI_AUTH', valueFrom: { secretKeyRef: { name: secret, key: '.dockerconfigjson' } } });
  } else {
    env.push(
      { name: 'FERRY_SOURCE_KIND', value: 'pvc' },
      { name: 'FERRY_SOURCE', value: label },
      { name: 'FERRY_SOURCE_PATH', value: source.pvc.path ? `${SOURCE_DIR}/${source.pvc.path}` : SOURCE_DIR },
    );
  }
  env.push(
    { name: 'FERRY_DEST', value: dest },
    ...extra,
    { name: 'HF_HUB_DISABLE_TELEMETRY', value: '1' },
    // Ferry prints its own progress lines; tqdm's carriage returns only clutter the log.
    { name: 'HF_HUB_DISABLE_PROGRESS_BARS', value: '1' },
    // A custom puller image may have no home directory for uid 2000; and no Xet chunk cache to fill the node's disk.
    { name: 'HF_HOME', value: '/tmp/hf-home' },
    { name: 'HF_XET_CHUNK_CACHE_SIZE_BYTES', value: '0' },
    { name: 'PYTHONUNBUFFERED', value: '1' },
  );
  // Absent in specs accepted before puller.env existed.
  for (const variable of model.spec.puller.env ?? []) {
    const i = env.findIndex((e) => e.name === variable.name);
    if (i >= 0) env.splice(i, 1);
    env.push(containerEnvVar(variable));
  }
  return env;
}

/**
 * The Job that puts one source's weights into `/models/<hash8>` on the model's volume, named
 * `<name>-pull-<hash8>`. It ends by its deadline rather than hang, retries `backoffLimit` times, and is not
 * cleaned up by a TTL: Ferry deletes it after success (to release a ReadWriteOnce volume) and keeps a failed one
 * for its logs.
 */
export function buildPullerJob(model: ServedModel, options: ChildOptions): V1Job {
  const { source, puller, engine } = model.spec;
  const hash8 = sourceHash8(source);
  const annotations = sourceAnnotations(source);
  const mounts: V1VolumeMount[] = [{ name: 'weights', mountPath: MODELS_DIR }];
  const base = slotBase(model.metadata.name, options.slot);
  const volumes: V1Volume[] = [{ name: 'weights', persistentVolumeClaim: { claimName: pvcName(base) } }];
  if (source.pvc) {
    mounts.push({ name: 'source', mountPath: SOURCE_DIR, readOnly: true });
    volumes.push({ name: 'source', persistentVolumeClaim: { claimName: source.pvc.claimName, readOnly: true } });
  }
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: objectMeta(model, 'puller', pullerJobName(base, hash8), {
      rootUid: options.rootUid,
      annotations,
    }),
    spec: {
      activeDeadlineSeconds: durationSeconds(puller.deadline),
      backoffLimit: puller.backoffLimit,
      template: {
        metadata: { labels: labelsFor(model, 'puller'), annotations: { ...annotations } },
        spec: {
          restartPolicy: 'Never',
          enableServiceLinks: false,
          automountServiceAccountToken: false,
          securityContext: podSecurityContext(),
          ...podScheduling(model),
          containers: [
            {
              name: PULLER_CONTAINER,
              image: puller.image ?? engine.image,
              // `command`, not `args`: the default image is vLLM's, whose entrypoint is the vLLM server, so arguments
              // alone would start a server. The entrypoint is replaced by a complete argv, one token per item (never a
              // shell string), and every parameter travels as an environment variable.
              command: ['python3', '-c', PULLER_SCRIPT],
              env: pullEnv(model, model.spec.source, describeSource(model.spec.source), weightsDir(model.spec.source)),
              resources: { requests: { cpu: '500m', memory: '1Gi' }, limits: { memory: '4Gi' } },
              securityContext: containerSecurityContext(),
              volumeMounts: mounts,
            },
          ],
          volumes,
        },
      },
    },
  };
}
