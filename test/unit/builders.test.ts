import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { KubernetesObject, V1PodSpec } from '@kubernetes/client-node';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { describe, expect, it } from 'vitest';
import {
  admissionConfigMap,
  admissionPort,
  buildAll,
  buildDeployment,
  buildPullerJob,
  buildPvc,
  buildWeightsRecord,
  childName,
  FIELD_MANAGER,
  holdsWeightsFor,
  LABEL_COMPONENT,
  LABEL_INSTANCE,
  LABEL_MANAGED_BY,
  LABEL_MODEL,
  LABEL_NAME,
  objectList,
  PULLER_SCRIPT,
  pvcName,
  rootName,
  selectorLabels,
  sourceHash,
  sourceHash8,
  type ModelObjects,
} from '../../activities/builders/index.js';
import {
  durationSeconds,
  parseServedModel,
  type ServedModel,
  type ServedModelInput,
} from '../../workflows/contract/index.js';
import {
  FIXTURE_NAMES,
  FIXTURE_ROOT_UID,
  fixtureModel,
  fixtureObjects,
  fixtures,
  type FixtureName,
  sloAdmission,
  fullHf,
  minimalHf,
  pvcSource,
} from './fixtures.js';

const UPDATE_GOLDEN = process.env.UPDATE_GOLDEN === '1';
const GOLDEN_HEADER =
  '# Generated from test/unit/fixtures.ts by test/unit/builders.test.ts.\n' +
  '# Review changes like code; rewrite with: UPDATE_GOLDEN=1 npx vitest run --project unit\n';

function expectGolden(file: string, value: unknown): void {
  const path = fileURLToPath(new URL(`./golden/${file}`, import.meta.url));
  const normalized = JSON.parse(JSON.stringify(value)) as unknown;
  if (UPDATE_GOLDEN) {
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, GOLDEN_HEADER + stringifyYaml(normalized, { lineWidth: 0 }));
    return;
  }
  if (!existsSync(path)) {
    throw new Error(`golden file ${file} is missing: create it with UPDATE_GOLDEN=1 npx vitest run --project unit`);
  }
  expect(normalized).toStrictEqual(parseYaml(readFileSync(path, 'utf8')));
}

const model = (doc: ServedModelInput): ServedModel => parseServedModel(structuredClone(doc));
const build = (doc: ServedModelInput, rootUid = FIXTURE_ROOT_UID): ModelObjects => buildAll(model(doc), { rootUid });
const withSpec = (doc: ServedModelInput, mutate: (d: ServedModelInput) => void): ServedModelInput => {
  const copy = structuredClone(doc);
  mutate(copy);
  return copy;
};
const podSpecs = (objects: ModelObjects): V1PodSpec[] => [
  objects.pullerJob.spec!.template.spec!,
  objects.deployment.spec!.template.spec!,
];

describe('golden objects', () => {
  const files: Record<keyof ModelObjects, string> = {
    root: 'root',
    pvc: 'pvc',
    pullerJob: 'puller-job',
    deployment: 'deployment',
    service: 'service',
    admission: 'admission',
    inferencePool: 'inference-pool',
    networkPolicy: 'network-policy',
    engineService: 'engine-service',
    frontConfig: 'front-config',
    frontDeployment: 'front-deployment',
  };

  describe.each(FIXTURE_NAMES)('%s', (fixture) => {
    const roles = Object.keys(fixtureObjects(fixture)) as (keyof ModelObjects)[];
    it.each(roles)('%s matches its golden file', (role) => {
      expectGolden(`${fixture}/${files[role]}.yaml`, fixtureObjects(fixture)[role]);
    });
  });

  it('gives only a model with a latency goal and admission the sidecar and its ConfigMap', () => {
    expect(Object.keys(fixtureObjects('slo-admission'))).toContain('admission');
    for (const fixture of ['minimal-hf', 'full-hf', 'pvc-source'] as const) {
      expect(fixtureObjects(fixture).admission).toBeUndefined();
      expect(fixtureObjects(fixture).deployment.spec!.template.spec!.containers.map((c) => c.name)).toEqual(['vllm']);
    }
    const pod = fixtureObjects('slo-admission').deployment.spec!.template.spec!;
    expect(pod.containers.map((c) => [c.name, c.ports?.map((p) => `${p.name}:${p.containerPort}`)])).toEqual([
      ['vllm', ['engine:8000']],
      ['admission', ['http:8080']],
    ]);
    expect(pod.containers[0]!.readinessProbe?.httpGet?.port).toBe('engine');
    const measureOnly = withSpec(sloAdmission, (d) => (d.spec.slo = { ttft: '2s', itl: '100ms', admission: false }));
    expect(build(measureOnly).admission).toBeUndefined();
    expect(build(measureOnly).deployment.spec!.template.spec!.containers).toHaveLength(1);
  });

  it('gives only a model with spec.inferencePool an InferencePool, on the port clients reach it on', () => {
    for (const fixture of ['minimal-hf', 'full-hf', 'pvc-source', 'slo-admission'] as const) {
      expect(fixtureObjects(fixture).inferencePool).toBeUndefined();
    }
    const { inferencePool: pool, deployment, service } = fixtureObjects('inference-pool');
    expect(pool!.spec.selector.matchLabels).toEqual(deployment.spec!.selector.matchLabels);
    expect(pool!.spec.selector.matchLabels).toEqual(service.spec!.selector);
    // With admission the pool's endpoints are the sidecars (what the Service's port name points to): 429 above the
    // measured concurrency still applies to the gateway's traffic.
    const ports = (name: string) =>
      deployment.spec!.template.spec!.containers.flatMap((c) => c.ports ?? []).find((p) => p.name === name);
    expect(pool!.spec.targetPorts).toEqual([{ number: ports('http')!.containerPort }]);
    expect(pool!.spec.endpointPickerRef).toEqual({
      group: '',
      kind: 'Service',
      name: 'qwen-pool-epp',
      port: { number: 9002 },
      failureMode: 'FailClose',
    });
    // Without admission: the engine's own port.
    const plain = build(
      withSpec(fixtures['inference-pool'], (d) => {
        delete d.spec.slo;
        d.spec.engine = { port: 8123 };
        d.spec.inferencePool!.endpointPicker.failureMode = 'FailOpen';
      }),
    );
    expect(plain.inferencePool!.spec.targetPorts).toEqual([{ number: 8123 }]);
    expect(plain.inferencePool!.spec.endpointPickerRef.failureMode).toBe('FailOpen');
  });

  describe('with a NetworkPolicy per model (FERRY_NETWORK_POLICY=on)', () => {
    const peer = { namespace: 'ferry-system', podLabels: { 'app.kubernetes.io/name': 'ferry-worker' } };
    const gated = (fixture: FixtureName) =>
      buildAll(fixtureModel(fixture), { rootUid: FIXTURE_ROOT_UID, networkPolicy: peer });

    it.each(['networkPolicy', 'admission', 'deployment'] as const)('minimal-hf: %s matches its golden file', (role) => {
      expectGolden(`gate/${files[role]}.yaml`, gated('minimal-hf')[role]);
    });

    it('gives every model the sidecar as its gate, and a policy that opens only the gate to everyone', () => {
      for (const fixture of FIXTURE_NAMES) {
        const objects = gated(fixture);
        const pod = objects.deployment.spec!.template.spec!;
        const ports = pod.containers.map((c) => [c.name, c.ports?.map((p) => p.name)]);
        expect(ports).toEqual([
          ['vllm', ['engine']],
          ['admission', ['http']],
        ]);
        // The Service and the pool reach the gate, never vLLM's own port.
        expect(objects.service.spec!.ports![0]!.targetPort).toBe('http');
        if (objects.inferencePool) {
          expect(objects.inferencePool.spec.targetPorts).toEqual([{ number: admissionPort(fixtureModel(fixture)) }]);
        }
        const policy = objects.networkPolicy!;
        // The engine's pods; with a front, those of both slots (a rollout's candidate is in the second).
        const { name: model } = fixtureModel(fixture).metadata;
        const engine = objects.deployment.spec!.selector.matchLabels!;
        if (!fixtureModel(fixture).spec.front) expect(policy.spec!.podSelector.matchLabels).toEqual(engine);
        else {
          const { 'app.kubernetes.io/instance': instance, ...rest } = engine;
          expect(instance).toBe(model);
          expect(policy.spec!.podSelector).toEqual({
            matchLabels: rest,
            matchExpressions: [{ key: 'app.kubernetes.io/instance', operator: 'In', values: [model, `${model}-b`] }],
          });
        }
        const [open, worker] = policy.spec!.ingress!;
        expect(open).toEqual({ ports: [{ protocol: 'TCP', port: 'http' }] });
        expect(worker!._from).toEqual([
          {
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ferry-system' } },
            podSelector: { matchLabels: peer.podLabels },
          },
        ]);
        expect(worker!.ports).toEqual([{ protocol: 'TCP', port: 'engine' }]);
        // The gate's configuration: clients get the inference routes only.
        const conf = objects.admission!.data!['nginx.conf']!;
        expect(conf).toContain("return 403 '");
        expect(conf).not.toContain('load_lora_adapter');
      }
    });

    it('keeps the measured limit on a model with admission, and none on the gate alone', () => {
      const limited = admissionConfigMap(fixtureModel('slo-admission'), 3, { rootUid: 'u', networkPolicy: peer });
      expect(limited.data!['max-concurrency']).toBe('3');
      expect(limited.data!['nginx.conf']).toContain('limit_conn ferry_admission 3;');
      const gate = admissionConfigMap(fixtureModel('minimal-hf'), 3, { rootUid: 'u', networkPolicy: peer });
      expect(gate.data!['max-concurrency']).toBeUndefined();
      expect(gate.data!['nginx.conf']).not.toContain('limit_conn');
    });

    it('lists the policy before the engine, so no engine pod runs before the policy does', () => {
      const kinds = objectList(gated('minimal-hf')).map((o) => o.kind);
      expect(kinds.indexOf('NetworkPolicy')).toBeLessThan(kinds.indexOf('Deployment'));
    });
  });

  it('builds the same objects every time (pure)', () => {
    for (const fixture of FIXTURE_NAMES) expect(fixtureObjects(fixture)).toStrictEqual(fixtureObjects(fixture));
  });
});

describe('every object', () => {
  it.each(FIXTURE_NAMES)(
    '%s: has apiVersion, kind, namespace and Ferry labels; users labels lose to ours',
    (fixture) => {
      const doc = withSpec(fixtures[fixture], (d) => {
        d.metadata.labels = { ...d.metadata.labels, [LABEL_MANAGED_BY]: 'helm', team: 'search' };
      });
      const m = model(doc);
      const objects = buildAll(m, { rootUid: FIXTURE_ROOT_UID });
      const components: Record<keyof ModelObjects, string> = {
        root: 'root',
        pvc: 'storage',
        pullerJob: 'puller',
        deployment: 'engine',
        service: 'service',
        admission: 'admission',
        inferencePool: 'pool',
        networkPolicy: 'network',
        engineService: 'service',
        frontConfig: 'front',
        frontDeployment: 'front',
      };
      for (const [role, object] of Object.entries(objects) as [keyof ModelObjects, KubernetesObject][]) {
        expect(object.apiVersion).toBeTruthy();
        expect(object.kind).toBeTruthy();
        expect(object.metadata?.namespace).toBe(m.metadata.namespace);
        expect(object.metadata?.labels).toMatchObject({
          [LABEL_NAME]: 'vllm',
          [LABEL_INSTANCE]: m.metadata.name,
          [LABEL_MANAGED_BY]: 'ferry',
          [LABEL_COMPONENT]: components[role],
          [LABEL_MODEL]: m.metadata.name,
          team: 'search',
        });
      }
      expect(FIELD_MANAGER).toBe('ferry');
    },
  );

  it('names: Deployment and Service <name>, PVC <name>-weights, Job <name>-pull-<hash8>, root <name>-ferry', () => {
    const m = fixtureModel('minimal-hf');
    const objects = fixtureObjects('minimal-hf');
    const hash8 = sourceHash8(m.spec.source);
    expect(objects.deployment.metadata?.name).toBe('qwen');
    expect(objects.service.metadata?.name).toBe('qwen');
    expect(objects.pvc.metadata?.name).toBe('qwen-weights');
    expect(objects.root.metadata?.name).toBe('qwen-ferry');
    expect(objects.pullerJob.metadata?.name).toBe(`qwen-pull-${hash8}`);
    expect(hash8).toMatch(/^[0-9a-f]{8}$/);
  });

  it('carries the source hash and a readable source as annotations, never the token', () => {
    const m = fixtureModel('full-hf');
    const objects = fixtureObjects('full-hf');
    for (const object of [objects.root, objects.pvc, objects.pullerJob, objects.deployment]) {
      expect(object.metadata?.annotations).toMatchObject({
        'ferry.dev/source-hash': sourceHash(m.spec.source),
        'ferry.dev/source': 'huggingface:Qwen/Qwen2.5-7B-Instruct@a09a35458c702b33eeacc393d103063234e8bc28',
      });
    }
    expect(sourceHash(m.spec.source)).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('owner references', () => {
  it('point every child at the root, neither controller nor blocking; the root has none', () => {
    const objects = fixtureObjects('minimal-hf', { rootUid: 'root-uid-1' });
    expect(objects.root.metadata?.ownerReferences).toBeUndefined();
    for (const child of [objects.pvc, objects.pullerJob, objects.deployment, objects.service]) {
      expect(child.metadata?.ownerReferences).toEqual([
        {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          name: 'qwen-ferry',
          uid: 'root-uid-1',
          controller: false,
          blockOwnerDeletion: false,
        },
      ]);
    }
  });

  it('are left off a retained PVC, which keeps its labels', () => {
    const objects = fixtureObjects('full-hf');
    expect(fixtureModel('full-hf').spec.storage.retainOnDelete).toBe(true);
    expect(objects.pvc.metadata?.ownerReferences).toBeUndefined();
    expect(objects.pvc.metadata?.labels?.[LABEL_MANAGED_BY]).toBe('ferry');
    expect(objects.deployment.metadata?.ownerReferences).toHaveLength(1);
  });
});

describe('PVC', () => {
  it('asks for the size and access mode, and leaves the class to the cluster when null', () => {
    const { pvc } = fixtureObjects('minimal-hf');
    expect(pvc.spec).toEqual({ accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '50Gi' } } });
    expect(fixtureObjects('full-hf').pvc.spec?.storageClassName).toBe('fast-ssd');
  });

  it('records which weights the volume holds under its own field manager', () => {
    const m = fixtureModel('minimal-hf');
    const record = buildWeightsRecord(m);
    expect(record.metadata?.name).toBe('qwen-weights');
    expect(Object.keys(record)).toEqual(['apiVersion', 'kind', 'metadata']);
    expect(holdsWeightsFor(record, m)).toBe(true);
    expect(holdsWeightsFor(record, fixtureModel('pvc-source'))).toBe(false);
    expect(holdsWeightsFor(buildPvc(m, { rootUid: 'x' }), m)).toBe(false);
  });
});

describe('puller Job', () => {
  it('is named after the source, with a deadline, retries and no TTL', () => {
    const m = fixtureModel('full-hf');
    const { pullerJob } = fixtureObjects('full-hf');
    expect(pullerJob.metadata?.name).toBe(`qwen-chat-pull-${sourceHash8(m.spec.source)}`);
    expect(pullerJob.spec?.activeDeadlineSeconds).toBe(3 * 3600);
    expect(pullerJob.spec?.backoffLimit).toBe(4);
    expect(pullerJob.spec?.ttlSecondsAfterFinished).toBeUndefined();
    const minimal = fixtureObjects('minimal-hf').pullerJob;
    expect(minimal.spec?.activeDeadlineSeconds).toBe(7200);
    expect(minimal.spec?.backoffLimit).toBe(2);
  });

  it('schedules like the engine, so a zonal volume binds where the engine can run', () => {
    const { pullerJob, deployment } = fixtureObjects('full-hf');
    const puller = pullerJob.spec!.template.spec!;
    const engine = deployment.spec!.template.spec!;
    expect(puller.nodeSelector).toEqual({ 'node.kubernetes.io/instance-type': 'g6e.12xlarge' });
    expect(puller.nodeSelector).toEqual(engine.nodeSelector);
    expect(puller.tolerations).toEqual(engine.tolerations);
    expect(puller.affinity).toEqual(engine.affinity);
    expect(puller.tolerations).toHaveLength(2);
    expect(puller.affinity?.nodeAffinity).toBeDefined();
    expect(puller.restartPolicy).toBe('Never');
  });

  it('runs the script with an explicit argv and passes every parameter as env', () => {
    const m = fixtureModel('full-hf');
    const container = fixtureObjects('full-hf').pullerJob.spec!.template.spec!.containers[0]!;
    expect(container.image).toBe('registry.example.com/ml/hf-puller:1.2.0');
    expect(container.command).toEqual(['python3', '-c', PULLER_SCRIPT]);
    expect(container.args).toBeUndefined();
    const env = Object.fromEntries(container.env!.map((e) => [e.name, e]));
    expect(env.FERRY_SOURCE_KIND?.value).toBe('huggingface');
    expect(env.FERRY_HF_REPO?.value).toBe('Qwen/Qwen2.5-7B-Instruct');
    expect(env.FERRY_HF_REVISION?.value).toBe('a09a35458c702b33eeacc393d103063234e8bc28');
    expect(env.FERRY_DEST?.value).toBe(`/models/${sourceHash8(m.spec.source)}`);
    expect(env.HF_HUB_DISABLE_TELEMETRY?.value).toBe('1');
    expect(env.HF_TOKEN).toEqual({ name: 'HF_TOKEN', valueFrom: { secretKeyRef: { name: 'hf-token', key: 'token' } } });
    expect(container.volumeMounts).toEqual([{ name: 'weights', mountPath: '/models' }]);
    expect(container.resources).toEqual({ requests: { cpu: '500m', memory: '1Gi' }, limits: { memory: '4Gi' } });
  });

  it('uses the engine image by default and sets no token without a token Secret', () => {
    const container = fixtureObjects('minimal-hf').pullerJob.spec!.template.spec!.containers[0]!;
    expect(container.image).toBe('vllm/vllm-openai:v0.32.0');
    expect(container.env!.map((e) => e.name)).not.toContain('HF_TOKEN');
  });

  it('mounts a pvc source read-only at /source and copies the given path', () => {
    const spec = fixtureObjects('pvc-source').pullerJob.spec!.template.spec!;
    const container = spec.containers[0]!;
    const env = Object.fromEntries(container.env!.map((e) => [e.name, e.value]));
    expect(env.FERRY_SOURCE_KIND).toBe('pvc');
    expect(env.FERRY_SOURCE_PATH).toBe('/source/run-42/step-1000');
    expect(container.volumeMounts).toContainEqual({ name: 'source', mountPath: '/source', readOnly: true });
    expect(spec.volumes).toContainEqual({
      name: 'source',
      persistentVolumeClaim: { claimName: 'checkpoints', readOnly: true },
    });
    expect(spec.volumes).toContainEqual({ name: 'weights', persistentVolumeClaim: { claimName: 'ckpt-eval-weights' } });
  });
});

describe('puller Job for an s3 source', () => {
  it('passes where the objects are as env and the keys only by reference to the Secret', () => {
    const m = fixtureModel('s3-source');
    const spec = fixtureObjects('s3-source').pullerJob.spec!.template.spec!;
    const container = spec.containers[0]!;
    const env = Object.fromEntries(container.env!.map((e) => [e.name, e]));
    expect(env.FERRY_SOURCE_KIND?.value).toBe('s3');
    expect(env.FERRY_S3_ENDPOINT?.value).toBe('http://minio.storage:9000');
    expect(env.FERRY_S3_BUCKET?.value).toBe('training-runs');
    expect(env.FERRY_S3_PREFIX?.value).toBe('run-42/step-1000');
    expect(env.FERRY_S3_REGION?.value).toBe('us-east-1');
    expect(env.FERRY_S3_ADDRESSING?.value).toBe('path');
    expect(env.FERRY_DEST?.value).toBe(`/models/${sourceHash8(m.spec.source)}`);
    for (const name of ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY']) {
      expect(env[name]).toEqual({ name, valueFrom: { secretKeyRef: { name: 'minio-keys', key: name } } });
    }
    expect(env.AWS_SESSION_TOKEN?.valueFrom?.secretKeyRef?.optional).toBe(true);
    // Nothing but the weights volume: the objects come over the network.
    expect(spec.volumes).toEqual([{ name: 'weights', persistentVolumeClaim: { claimName: 'ckpt-s3-weights' } }]);
  });

  it('sends no keys for a public bucket', () => {
    const doc = structuredClone(fixtures['s3-source']) as { spec: { source: { s3: Record<string, unknown> } } };
    delete doc.spec.source.s3.credentialsSecret;
    const names = buildPullerJob(parseServedModel(doc), {
      rootUid: FIXTURE_ROOT_UID,
    }).spec!.template.spec!.containers[0]!.env!.map((e) => e.name);
    expect(names.filter((n) => n.startsWith('AWS_'))).toEqual([]);
  });
});

describe('puller Job for an oci source', () => {
  it('passes the reference as env and the docker config only by reference to the Secret', () => {
    const doc = structuredClone(fixtures['minimal-hf']) as { spec: { source: unknown } };
    doc.spec.source = {
      oci: { reference: 'registry.example.com/models/qwen:1.0', credentialsSecret: { name: 'regcred' } },
    };
    const job = buildPullerJob(parseServedModel(doc), { rootUid: FIXTURE_ROOT_UID });
    const env = Object.fromEntries(job.spec!.template.spec!.containers[0]!.env!.map((e) => [e.name, e]));
    expect(env.FERRY_SOURCE_KIND?.value).toBe('oci');
    expect(env.FERRY_OCI_REFERENCE?.value).toBe('registry.example.com/models/qwen:1.0');
    expect(env.FERRY_OCI_PLAIN_HTTP?.value).toBe('0');
    expect(env.FERRY_OCI_AUTH).toEqual({
      name: 'FERRY_OCI_AUTH',
      valueFrom: { secretKeyRef: { name: 'regcred', key: '.dockerconfigjson' } },
    });
    expect(env.FERRY_OCI_PATH).toBeUndefined();
    doc.spec.source = { oci: { reference: 'registry.example.com/models/qwen:1.0', path: '/opt/weights' } };
    const image = buildPullerJob(parseServedModel(doc), { rootUid: FIXTURE_ROOT_UID });
    expect(image.spec!.template.spec!.containers[0]!.env).toContainEqual({
      name: 'FERRY_OCI_PATH',
      value: '/opt/weights',
    });
  });
});

describe('Deployment', () => {
  it('recreates pods instead of surging', () => {
    expect(fixtureObjects('minimal-hf').deployment.spec?.strategy).toEqual({ type: 'Recreate' });
  });

  it('passes only args to the vLLM entrypoint, model from the volume', () => {
    const m = fixtureModel('minimal-hf');
    const container = fixtureObjects('minimal-hf').deployment.spec!.template.spec!.containers[0]!;
    expect(container.name).toBe('vllm');
    expect(container.command).toBeUndefined();
    expect(container.args).toEqual([
      '--model',
      `/models/${sourceHash8(m.spec.source)}`,
      '--served-model-name',
      'qwen',
      '--port',
      '8000',
    ]);
    expect(container.env).toContainEqual({ name: 'HF_HUB_OFFLINE', value: '1' });
    expect(container.volumeMounts).toContainEqual({ name: 'weights', mountPath: '/models', readOnly: true });
  });

  it('appends the user args after its own', () => {
    const args = fixtureObjects('full-hf').deployment.spec!.template.spec!.containers[0]!.args!;
    expect(args.slice(-4)).toEqual(['--max-model-len=8192', '--gpu-memory-utilization=0.90', '--max-lora-rank', '64']);
  });

  it('gives vLLM the API key only as VLLM_API_KEY from the Secret', () => {
    const objects = fixtureObjects('full-hf');
    const container = objects.deployment.spec!.template.spec!.containers[0]!;
    const keyVars = container.env!.filter((e) => e.name === 'VLLM_API_KEY');
    expect(keyVars).toEqual([
      { name: 'VLLM_API_KEY', valueFrom: { secretKeyRef: { name: 'qwen-api-key', key: 'key' } } },
    ]);
    expect(container.args!.some((a) => /api[-_]key/.test(a))).toBe(false);
    expect(container.env!.map((e) => e.name)).not.toContain('HF_TOKEN');
    expect(
      fixtureObjects('minimal-hf').deployment.spec!.template.spec!.containers[0]!.env!.map((e) => e.name),
    ).not.toContain('VLLM_API_KEY');
  });

  it('passes user env after its own, secrets as references', () => {
    const env = fixtureObjects('full-hf').deployment.spec!.template.spec!.containers[0]!.env!;
    expect(env.slice(-2)).toEqual([
      { name: 'VLLM_LOGGING_LEVEL', value: 'DEBUG' },
      { name: 'WANDB_API_KEY', valueFrom: { secretKeyRef: { name: 'wandb', key: 'api-key' } } },
    ]);
    expect(new Set(env.map((e) => e.name)).size).toBe(env.length);
  });

  it('lets a user override a default env var without a duplicate (server-side apply rejects duplicates)', () => {
    const doc = withSpec(minimalHf, (d) => {
      d.spec.engine = { env: [{ name: 'VLLM_NO_USAGE_STATS', value: '0' }] };
    });
    const env = build(doc).deployment.spec!.template.spec!.containers[0]!.env!;
    expect(env.filter((e) => e.name === 'VLLM_NO_USAGE_STATS')).toEqual([{ name: 'VLLM_NO_USAGE_STATS', value: '0' }]);
  });

  it('enables LoRA with flags and runtime updating, only when asked', () => {
    const lora = fixtureObjects('full-hf').deployment.spec!.template.spec!.containers[0]!;
    expect(lora.args).toContain('--enable-lora');
    expect(lora.args).toContain('--max-loras=8');
    expect(lora.env).toContainEqual({ name: 'VLLM_ALLOW_RUNTIME_LORA_UPDATING', value: 'True' });
    const plain = fixtureObjects('minimal-hf').deployment.spec!.template.spec!.containers[0]!;
    expect(plain.args!.some((a) => a.includes('lora'))).toBe(false);
    expect(plain.env!.map((e) => e.name)).not.toContain('VLLM_ALLOW_RUNTIME_LORA_UPDATING');
  });

  it('passes maxLoraRank only when set, and keeps adapters out of the pod template (adding one rolls out nothing)', () => {
    const lora = (extra: object) =>
      build(withSpec(minimalHf, (d) => (d.spec.engine = { lora: { enabled: true, ...extra } }))).deployment;
    const plain = lora({});
    expect(plain.spec!.template.spec!.containers[0]!.args!.some((a) => a.startsWith('--max-lora-rank'))).toBe(false);
    expect(lora({ maxLoraRank: 64 }).spec!.template.spec!.containers[0]!.args).toContain('--max-lora-rank=64');
    const adapters = [{ name: 'sql', source: { huggingface: { repo: 'org/sql-lora' } } }];
    expect(lora({ adapters }).spec!.template).toStrictEqual(plain.spec!.template);
  });

  it('mounts a memory-backed /dev/shm of shmSize', () => {
    const spec = fixtureObjects('full-hf').deployment.spec!.template.spec!;
    expect(spec.volumes).toContainEqual({ name: 'dshm', emptyDir: { medium: 'Memory', sizeLimit: '16Gi' } });
    expect(spec.containers[0]!.volumeMounts).toContainEqual({ name: 'dshm', mountPath: '/dev/shm' });
  });

  it.each([
    ['40m', 240, 3000],
    ['1h30m', 540, 6000],
    ['95s', 10, 695],
  ])('lets a startup of %s pass: startup probe 10 s x %d, progress deadline %d s', (timeout, threshold, deadline) => {
    const doc = withSpec(minimalHf, (d) => {
      d.spec.engine = { startupTimeout: timeout };
    });
    const deployment = build(doc).deployment;
    const container = deployment.spec!.template.spec!.containers[0]!;
    const probe = container.startupProbe!;
    expect(probe.httpGet).toEqual({ path: '/health', port: 'http' });
    expect(probe.periodSeconds).toBe(10);
    expect(probe.failureThreshold).toBe(threshold);
    expect(probe.periodSeconds! * probe.failureThreshold!).toBeGreaterThanOrEqual(durationSeconds(timeout));
    expect(deployment.spec?.progressDeadlineSeconds).toBe(deadline);
    expect(container.readinessProbe).toMatchObject({ periodSeconds: 10, failureThreshold: 3 });
    expect(container.livenessProbe).toMatchObject({ periodSeconds: 15, failureThreshold: 4 });
    expect(container.ports).toEqual([{ name: 'http', containerPort: 8000, protocol: 'TCP' }]);
  });

  it('requests and limits GPUs, CPU and memory', () => {
    const container = fixtureObjects('full-hf').deployment.spec!.template.spec!.containers[0]!;
    const amounts = { cpu: '8', memory: '64Gi', 'nvidia.com/gpu': '2' };
    expect(container.resources).toEqual({ requests: amounts, limits: amounts });
    const cpuOnly = build(withSpec(minimalHf, (d) => void (d.spec.resources = { gpus: 0 })));
    const resources = cpuOnly.deployment.spec!.template.spec!.containers[0]!.resources!;
    expect(Object.keys(resources.limits!)).toEqual(['cpu', 'memory']);
  });

  it('keeps its selector across updates, and the Service selects the same pods', () => {
    const before = fixtureObjects('full-hf');
    const after = build(
      withSpec(fullHf, (d) => {
        d.spec.engine = { ...d.spec.engine, image: 'vllm/vllm-openai:v0.12.0' };
        d.spec.source = { pvc: { claimName: 'checkpoints', path: 'x' } };
        d.metadata.labels = { team: 'other' };
      }),
    );
    const selector = selectorLabels('qwen-chat');
    expect(before.deployment.spec?.selector).toEqual({ matchLabels: selector });
    expect(after.deployment.spec?.selector).toEqual(before.deployment.spec?.selector);
    expect(before.service.spec?.selector).toEqual(selector);
    expect(before.deployment.spec!.template.metadata?.labels).toMatchObject(selector);
  });

  it('rolls new pods for a new source, but not for a new replica count', () => {
    const base = fixtureObjects('minimal-hf').deployment;
    const scaled = build(withSpec(minimalHf, (d) => void (d.spec.replicas = 3))).deployment;
    const moved = build(
      withSpec(minimalHf, (d) => {
        d.spec.source = { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct', revision: 'v2' } };
      }),
    ).deployment;
    expect(scaled.spec?.template).toStrictEqual(base.spec?.template);
    expect(scaled.spec?.replicas).toBe(3);
    expect(moved.spec?.template.metadata?.annotations?.['ferry.dev/source-hash']).not.toBe(
      base.spec?.template.metadata?.annotations?.['ferry.dev/source-hash'],
    );
    expect(moved.spec?.template.metadata?.annotations?.['ferry.dev/spec-hash']).not.toBe(
      base.spec?.template.metadata?.annotations?.['ferry.dev/spec-hash'],
    );
  });

  it('can be built with zero replicas to release the volume', () => {
    const deployment = buildDeployment(fixtureModel('full-hf'), { rootUid: FIXTURE_ROOT_UID, replicas: 0 });
    expect(deployment.spec?.replicas).toBe(0);
  });
});

describe('Service', () => {
  it('is a ClusterIP on the engine port, named http, to the named container port', () => {
    const { service } = fixtureObjects('full-hf');
    expect(service.metadata?.name).toBe('qwen-chat');
    expect(service.spec).toEqual({
      type: 'ClusterIP',
      selector: selectorLabels('qwen-chat'),
      ports: [{ name: 'http', port: 8080, targetPort: 'http', protocol: 'TCP' }],
    });
  });
});

describe('pod security', () => {
  it.each(FIXTURE_NAMES)('%s: puller and engine pass Pod Security "restricted" as uid 2000 gid 0', (fixture) => {
    for (const spec of podSpecs(fixtureObjects(fixture))) {
      expect(spec.securityContext).toEqual({
        runAsNonRoot: true,
        runAsUser: 2000,
        runAsGroup: 0,
        fsGroup: 0,
        fsGroupChangePolicy: 'OnRootMismatch',
        seccompProfile: { type: 'RuntimeDefault' },
      });
      expect(spec.enableServiceLinks).toBe(false);
      expect(spec.automountServiceAccountToken).toBe(false);
      expect(spec.hostNetwork ?? false).toBe(false);
      for (const container of spec.containers) {
        // The admission sidecar runs as its image's nginx user instead (test/unit/admission.test.ts checks it).
        const own = container.name === 'admission' ? { runAsUser: 101, runAsNonRoot: true } : {};
        expect(container.securityContext).toEqual({
          allowPrivilegeEscalation: false,
          capabilities: { drop: ['ALL'] },
          ...own,
        });
      }
      const allowed = ['persistentVolumeClaim', 'emptyDir', 'configMap', 'name'];
      for (const volume of spec.volumes ?? []) expect(Object.keys(volume).every((k) => allowed.includes(k))).toBe(true);
    }
  });

  it('puts no secret value into any object', () => {
    const text = JSON.stringify(objectList(fixtureObjects('full-hf')));
    expect(text).not.toMatch(/--api-key/);
    expect(text.match(/"name":"(VLLM_API_KEY|HF_TOKEN)","value"/)).toBeNull();
  });
});

describe('source hash', () => {
  const hashOf = (doc: ServedModelInput) => sourceHash(model(doc).spec.source);

  it('ignores the token Secret, so rotating it does not re-pull', () => {
    const rotated = withSpec(fullHf, (d) => {
      d.spec.source.huggingface!.tokenSecret = { name: 'hf-token-rotated', key: 'new' };
    });
    const untokened = withSpec(fullHf, (d) => void delete d.spec.source.huggingface!.tokenSecret);
    expect(hashOf(rotated)).toBe(hashOf(fullHf));
    expect(hashOf(untokened)).toBe(hashOf(fullHf));
    expect(build(rotated).pullerJob.metadata?.name).toBe(build(fullHf).pullerJob.metadata?.name);
  });

  it('changes with the revision, the repository, or the pvc path', () => {
    const revision = withSpec(fullHf, (d) => void (d.spec.source.huggingface!.revision = 'main'));
    const repo = withSpec(fullHf, (d) => void (d.spec.source.huggingface!.repo = 'Qwen/Qwen2.5-14B-Instruct'));
    const path = withSpec(pvcSource, (d) => void (d.spec.source.pvc!.path = 'run-42/step-2000'));
    expect(hashOf(revision)).not.toBe(hashOf(fullHf));
    expect(hashOf(repo)).not.toBe(hashOf(fullHf));
    expect(hashOf(path)).not.toBe(hashOf(pvcSource));
    expect(build(revision).pullerJob.metadata?.name).not.toBe(build(fullHf).pullerJob.metadata?.name);
  });

  it('is a default revision of main, written or not', () => {
    const explicit = withSpec(minimalHf, (d) => void (d.spec.source.huggingface!.revision = 'main'));
    expect(hashOf(explicit)).toBe(hashOf(minimalHf));
  });
});

describe('long names', () => {
  const long = 'a'.repeat(40) + '-' + 'b'.repeat(22); // 63 characters, the longest valid model name
  const doc = withSpec(minimalHf, (d) => void (d.metadata.name = long));

  it('shortens child names to at most 63 characters, deterministically, keeping the suffix readable', () => {
    const objects = build(doc);
    const names = [objects.root, objects.pvc, objects.pullerJob].map((o) => o.metadata!.name!);
    for (const name of names) {
      expect(name.length).toBeLessThanOrEqual(63);
      expect(name).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
      expect(name.startsWith('aaaaaaaa')).toBe(true);
    }
    expect(names[0]).toMatch(/-[0-9a-f]{8}-ferry$/);
    expect(names[1]).toMatch(/-[0-9a-f]{8}-weights$/);
    expect(names[2]).toMatch(new RegExp(`-[0-9a-f]{8}-pull-${sourceHash8(model(doc).spec.source)}$`));
    expect(build(doc).pvc.metadata?.name).toBe(names[1]);
    expect(objects.deployment.spec!.template.spec!.volumes![0]!.persistentVolumeClaim!.claimName).toBe(names[1]);
    expect(objects.pullerJob.metadata?.ownerReferences?.[0]?.name).toBe(names[0]);
  });

  it('keeps two long names with a common prefix apart', () => {
    const other = long.slice(0, -1) + 'c';
    expect(pvcName(other)).not.toBe(pvcName(long));
    expect(rootName(other)).not.toBe(rootName(long));
  });

  it('leaves names that fit alone', () => {
    expect(childName('qwen', 'weights')).toBe('qwen-weights');
    const fits = 'q'.repeat(55); // + '-weights' = 63
    expect(childName(fits, 'weights')).toBe(`${fits}-weights`);
    expect(childName(fits + 'q', 'weights')).toHaveLength(63);
  });

  it('hashes everything when even the suffix does not fit', () => {
    const name = childName('model', 'x'.repeat(70));
    expect(name).toHaveLength(63);
    expect(name).toBe(childName('model', 'x'.repeat(70)));
  });
});

describe('builders on their own', () => {
  it('build the same objects as buildAll', () => {
    const m = fixtureModel('pvc-source');
    const options = { rootUid: FIXTURE_ROOT_UID };
    const all = buildAll(m, options);
    expect(buildPvc(m, options)).toStrictEqual(all.pvc);
    expect(buildPullerJob(m, options)).toStrictEqual(all.pullerJob);
    expect(buildDeployment(m, options)).toStrictEqual(all.deployment);
    expect(objectList(all).map((o) => o.kind)).toEqual([
      'ConfigMap',
      'PersistentVolumeClaim',
      'Job',
      'Deployment',
      'Service',
    ]);
  });
});
