import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import {
  adapterDir,
  adapterJobName,
  buildAdapterJob,
  PRUNE_SCRIPT,
  selectorLabels,
  sourceHash8,
} from '../../activities/builders/index.js';
import { adapterFetches } from '../../activities/readers/adapter-job.js';
import { parseServedModel, type ServedModel } from '../../workflows/contract/index.js';
import { FIXTURE_ROOT_UID, minimalHf } from './fixtures.js';

const python = spawnSync('python3', ['--version']).status === 0;

function model(lora: object, spec: object = {}): ServedModel {
  const doc = structuredClone(minimalHf) as { spec: Record<string, unknown> };
  Object.assign(doc.spec, spec, { engine: { lora: { enabled: true, ...lora } } });
  return parseServedModel(doc);
}

const sql = {
  name: 'sql',
  source: { huggingface: { repo: 'org/sql-lora', tokenSecret: { name: 'hf', key: 'token' } } },
};
const chat = { name: 'chat', source: { pvc: { claimName: 'checkpoints', path: 'run-7/lora' } } };

describe('the adapter Job', () => {
  const withTwo = model({ adapters: [sql, chat] }, { scheduling: { affinity: { podAntiAffinity: {} } } });
  const job = buildAdapterJob(withTwo, { rootUid: FIXTURE_ROOT_UID });
  const pod = job.spec!.template.spec!;
  const env = (container: string) =>
    Object.fromEntries(
      pod.containers.find((c) => c.name === container)!.env!.map((e) => [e.name, e.value ?? e.valueFrom]),
    );

  it('has one container per adapter, each fetching into its own directory, and one that prunes', () => {
    expect(job.metadata!.name).toBe(adapterJobName('qwen', withTwo.spec.engine.lora.adapters!));
    expect(job.metadata!.name).toMatch(/^qwen-adapters-[0-9a-f]{8}$/);
    expect(job.metadata!.labels).toMatchObject({
      'app.kubernetes.io/component': 'adapters',
      'ferry.dev/model': 'qwen',
    });
    expect(job.metadata!.ownerReferences).toEqual([
      expect.objectContaining({ kind: 'ConfigMap', uid: FIXTURE_ROOT_UID }),
    ]);
    expect(job.spec!.backoffLimit).toBe(0);
    expect(pod.restartPolicy).toBe('Never');
    expect(pod.containers.map((c) => c.name)).toEqual(['adapter-0', 'adapter-1', 'prune']);
    const [first, second] = withTwo.spec.engine.lora.adapters!;
    expect(env('adapter-0')).toMatchObject({
      FERRY_SOURCE_KIND: 'huggingface',
      FERRY_HF_REPO: 'org/sql-lora',
      FERRY_HF_REVISION: 'main',
      FERRY_DEST: adapterDir(first!.source),
      FERRY_PRUNE: '0',
      HF_TOKEN: { secretKeyRef: { name: 'hf', key: 'token' } },
    });
    expect(env('adapter-1')).toMatchObject({
      FERRY_SOURCE_KIND: 'pvc',
      FERRY_SOURCE_PATH: '/source/run-7/lora',
      FERRY_DEST: adapterDir(second!.source),
    });
    // Only the adapter that needs the token gets it; only the one copied from a claim mounts it.
    expect(env('adapter-1').HF_TOKEN).toBeUndefined();
    expect(pod.volumes).toContainEqual({
      name: 'source-1',
      persistentVolumeClaim: { claimName: 'checkpoints', readOnly: true },
    });
    expect(pod.containers[0]!.volumeMounts!.map((m) => m.name)).toEqual(['weights']);
    expect(pod.containers[1]!.volumeMounts!.map((m) => m.name)).toEqual(['weights', 'source-1']);
    expect(env('prune')).toEqual({
      FERRY_ADAPTERS_DIR: '/models/adapters',
      FERRY_KEEP: `${sourceHash8(first!.source)} ${sourceHash8(second!.source)}`,
    });
    for (const c of pod.containers) expect(c.terminationMessagePolicy).toBe('FallbackToLogsOnError');
  });

  it('runs beside the engine on a ReadWriteOnce volume, keeping the user’s affinity; anywhere on ReadWriteMany', () => {
    expect(pod.affinity).toEqual({
      podAntiAffinity: {},
      podAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: [
          { labelSelector: { matchLabels: selectorLabels('qwen') }, topologyKey: 'kubernetes.io/hostname' },
        ],
      },
    });
    const shared = buildAdapterJob(model({ adapters: [sql] }, { storage: { accessMode: 'ReadWriteMany' } }), {
      rootUid: FIXTURE_ROOT_UID,
    });
    expect(shared.spec!.template.spec!.affinity).toBeUndefined();
  });

  it('is named by the adapters’ sources: a renamed adapter is the same Job, a new revision another', () => {
    const names = (adapters: object[]) => adapterJobName('qwen', model({ adapters }).spec.engine.lora.adapters!);
    expect(names([sql, chat])).toBe(names([chat, { ...sql, name: 'sql-v1' }]));
    const newer = { ...sql, source: { huggingface: { repo: 'org/sql-lora', revision: 'v2' } } };
    expect(names([newer, chat])).not.toBe(names([sql, chat]));
  });
});

describe.runIf(python)('the prune container', () => {
  it('removes every adapter directory the spec no longer lists, half-fetched ones too', () => {
    const root = join(mkdtempSync(join(tmpdir(), 'ferry-prune-')), 'adapters');
    for (const dir of ['aaaaaaaa', 'bbbbbbbb', 'cccccccc.partial'])
      mkdirSync(join(root, dir, 'x'), { recursive: true });
    writeFileSync(join(root, 'stray'), '');
    const run = spawnSync('python3', ['-c', PRUNE_SCRIPT], {
      env: { FERRY_ADAPTERS_DIR: root, FERRY_KEEP: 'aaaaaaaa dddddddd' },
      encoding: 'utf8',
    });
    expect(run.status, run.stderr).toBe(0);
    expect(readdirSync(root)).toEqual(['aaaaaaaa']);
    expect(JSON.parse(run.stdout.replace('FERRY_PRUNED ', ''))).toEqual({
      removed: ['bbbbbbbb', 'cccccccc.partial', 'stray'],
    });
    // A volume without adapters yet: the directory is made, nothing removed.
    const fresh = join(mkdtempSync(join(tmpdir(), 'ferry-prune-')), 'adapters');
    expect(spawnSync('python3', ['-c', PRUNE_SCRIPT], { env: { FERRY_ADAPTERS_DIR: fresh } }).status).toBe(0);
    expect(existsSync(fresh)).toBe(true);
  });
});

describe('what the adapter Job’s pod says about each adapter', () => {
  const adapters = model({ adapters: [sql, chat, { ...sql, name: 'third', source: { huggingface: { repo: 'o/t' } } }] })
    .spec.engine.lora.adapters!;
  const status = (containerStatuses: object[], phase = 'Running') =>
    ({ status: { phase, containerStatuses } }) as V1Pod;

  it('reads each container: exit 0 fetched, a failure with the puller’s reason, a wait as it is', () => {
    const pod = status([
      { name: 'adapter-0', state: { terminated: { exitCode: 0 } } },
      {
        name: 'adapter-1',
        state: {
          terminated: {
            exitCode: 1,
            reason: 'Error',
            message:
              'copying\nFERRY_ERROR {"reason": "SourceNotFound", "message": "/source/run-7/lora does not exist"}\n',
          },
        },
      },
      { name: 'adapter-2', state: { waiting: { reason: 'ImagePullBackOff', message: 'pull failed' } } },
      { name: 'prune', state: { terminated: { exitCode: 0 } } },
    ]);
    expect(adapterFetches(pod, adapters)).toEqual([
      { name: 'sql', state: 'Fetched' },
      { name: 'chat', state: 'Failed', reason: 'SourceNotFound', message: '/source/run-7/lora does not exist' },
      { name: 'third', state: 'Running', reason: 'ImagePullBackOff', message: 'pull failed' },
    ]);
  });

  it('a container killed without a word, a pod ended by its deadline, and no pod yet', () => {
    const killed = status([{ name: 'adapter-0', state: { terminated: { exitCode: 137, reason: 'OOMKilled' } } }]);
    expect(adapterFetches(killed, adapters)[0]).toEqual({
      name: 'sql',
      state: 'Failed',
      reason: 'DownloadFailed',
      message: 'its container exited with code 137 (OOMKilled)',
    });
    const ended = { status: { phase: 'Failed', reason: 'DeadlineExceeded', message: 'Pod was active too long' } };
    expect(adapterFetches(ended as V1Pod, adapters)[1]).toEqual({
      name: 'chat',
      state: 'Failed',
      reason: 'DeadlineExceeded',
      message: 'Pod was active too long',
    });
    expect(adapterFetches(undefined, adapters).map((a) => a.state)).toEqual(['Running', 'Running', 'Running']);
  });
});
