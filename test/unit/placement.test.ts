// Placement at start (docs/design/fleet.md, §3): the spec's `placement`, the choice, and a cluster's free GPUs as a
// worker reads them from its nodes and pods.
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { nodeCapacities } from '../../activities/readers/capacity.js';
import {
  choosePlacement,
  gpuDemandOf,
  leftAfterPlacing,
  parseServedModel,
  placementIssue,
  safeParseServedModel,
  specForUpdate,
  SpecError,
  type ClusterCapacity,
  type GpuDemand,
  type NodeCapacity,
} from '../../workflows/contract/index.js';
import { minimalHf } from './fixtures.js';

const placed = (spec: Record<string, unknown>) => ({ ...minimalHf, spec: { ...minimalHf.spec, ...spec } });

function issuesOf(doc: unknown) {
  const result = safeParseServedModel(doc);
  if (result.ok) throw new Error('expected the document to be rejected');
  return result.issues;
}

describe('spec.placement', () => {
  it('is accepted with 1 to 16 distinct cluster names; until placed, the cluster is the first listed', () => {
    const model = parseServedModel(placed({ placement: { clusters: ['west', 'east'] } }));
    expect(model.spec.placement).toEqual({ clusters: ['west', 'east'] });
    expect(model.spec.cluster).toBe('west');
    const sixteen = Array.from({ length: 16 }, (_, i) => `c${i}`);
    expect(parseServedModel(placed({ placement: { clusters: sixteen } })).spec.placement?.clusters).toHaveLength(16);
  });

  it('without it, the cluster is still default', () => {
    expect(parseServedModel(minimalHf).spec.cluster).toBe('default');
  });

  it('is refused with spec.cluster, naming both', () => {
    const issues = issuesOf(placed({ cluster: 'west', placement: { clusters: ['west', 'east'] } }));
    expect(issues).toEqual([
      {
        path: 'spec.placement',
        message: expect.stringMatching(
          /cannot be given with spec\.cluster.*give one of spec\.cluster and spec\.placement/,
        ),
      },
    ]);
  });

  it('refuses no clusters, more than 16, a name listed twice, a name that is not a cluster name, unknown fields', () => {
    expect(issuesOf(placed({ placement: { clusters: [] } }))).toEqual([
      { path: 'spec.placement.clusters', message: 'must name at least one cluster' },
    ]);
    const seventeen = Array.from({ length: 17 }, (_, i) => `c${i}`);
    expect(issuesOf(placed({ placement: { clusters: seventeen } }))).toEqual([
      { path: 'spec.placement.clusters', message: 'must name at most 16 clusters' },
    ]);
    expect(issuesOf(placed({ placement: { clusters: ['east', 'west', 'east'] } }))).toEqual([
      { path: 'spec.placement.clusters[2]', message: 'east is listed twice' },
    ]);
    expect(issuesOf(placed({ placement: { clusters: ['East_1'] } }))[0]).toMatchObject({
      path: 'spec.placement.clusters[0]',
      message: expect.stringContaining('must be a cluster name'),
    });
    expect(issuesOf(placed({ placement: {} }))).toEqual([{ path: 'spec.placement.clusters', message: 'is required' }]);
    expect(issuesOf(placed({ placement: { clusters: ['east'], prefer: 'east' } }))[0]?.path).toBe(
      'spec.placement.prefer',
    );
  });

  it("is refused by a model's workflow, which serves a document that names its cluster", () => {
    const model = parseServedModel(placed({ placement: { clusters: ['west', 'east'] } }));
    expect(placementIssue(model)?.path).toBe('spec.placement');
    expect(placementIssue(parseServedModel(minimalHf))).toBeUndefined();
    const current = parseServedModel(placed({ cluster: 'west' }));
    expect(() => specForUpdate(current, placed({ placement: { clusters: ['west'] } }))).toThrow(SpecError);
  });

  it('counts the replicas a model starts with, its GPUs each, and whether its volume keeps them on one node', () => {
    const gpus = { resources: { gpus: 2 } };
    expect(gpuDemandOf(parseServedModel(placed({ ...gpus, replicas: 3 })))).toEqual({
      replicas: 3,
      gpus: 2,
      sameNode: true,
    });
    const many = placed({ ...gpus, replicas: 3, storage: { accessMode: 'ReadWriteMany' } });
    expect(gpuDemandOf(parseServedModel(many)).sameNode).toBe(false);
    const scaled = placed({ ...gpus, replicas: 1, scaling: { minReplicas: 2, maxReplicas: 4, targetConcurrency: 8 } });
    expect(gpuDemandOf(parseServedModel(scaled)).replicas).toBe(2);
  });
});

const node = (name: string, free: number, allocatable = 4): NodeCapacity => ({ name, allocatable, free });
const cluster = (name: string, ...free: number[]): ClusterCapacity => ({
  cluster: name,
  nodes: free.map((f, i) => node(`${name}-${i}`, f)),
});
const spread = (replicas: number, gpus: number): GpuDemand => ({ replicas, gpus, sameNode: false });

describe('choosePlacement', () => {
  it('chooses the cluster with the most GPUs left once the replicas fit', () => {
    const choice = choosePlacement(spread(2, 2), [cluster('west', 2, 2), cluster('east', 4, 4)]);
    expect(choice.cluster).toBe('east');
    expect(choice.reason).toBe(
      'the most GPUs left after 2 replicas × 2 GPUs: west: 4 GPUs free on 2 nodes (at most 2 on one), 0 left after; ' +
        'east: 8 GPUs free on 2 nodes (at most 4 on one), 4 left after',
    );
  });

  it('fits node by node: free GPUs split over nodes do not hold a replica that needs more than one has', () => {
    const choice = choosePlacement(spread(1, 4), [cluster('west', 3, 3, 3), cluster('east', 4)]);
    expect(choice.cluster).toBe('east');
    expect(choice.clusters[0]).toMatchObject({ cluster: 'west', free: 9, fits: false });
  });

  it('puts replicas that share a volume on one node', () => {
    const demand: GpuDemand = { replicas: 2, gpus: 2, sameNode: true };
    expect(choosePlacement(demand, [cluster('west', 2, 2, 2), cluster('east', 4)]).cluster).toBe('east');
    expect(choosePlacement(demand, [cluster('west', 2, 2, 2)]).cluster).toBeUndefined();
  });

  it('gives a tie to the cluster listed first', () => {
    expect(choosePlacement(spread(1, 1), [cluster('west', 4), cluster('east', 4)]).cluster).toBe('west');
    expect(choosePlacement(spread(1, 1), [cluster('east', 4), cluster('west', 4)]).cluster).toBe('east');
  });

  it('passes over a cluster whose worker did not answer, and says so', () => {
    const choice = choosePlacement(spread(1, 1), [{ cluster: 'west', unanswered: 'no worker' }, cluster('east', 1)]);
    expect(choice.cluster).toBe('east');
    expect(choice.reason).toContain('west: no answer (no worker)');
  });

  it('finds no cluster when none has room, naming what each has free', () => {
    const choice = choosePlacement(spread(1, 2), [
      cluster('west', 0, 1),
      { cluster: 'east', unanswered: 'no worker of ferry-east took the reading within 10 s' },
    ]);
    expect(choice.cluster).toBeUndefined();
    expect(choice.reason).toBe(
      'no listed cluster has room for 1 replica × 2 GPUs: west: 1 GPUs free on 2 nodes (at most 1 on one), does not ' +
        'fit; east: no answer (no worker of ferry-east took the reading within 10 s)',
    );
  });

  it('fits a model that asks for no GPU anywhere, choosing the most free', () => {
    expect(choosePlacement(spread(2, 0), [cluster('west'), cluster('east', 1)]).cluster).toBe('east');
  });

  // An independent check of "fits": replicas placed one by one, each on the node with the most GPUs free.
  function fitsBySimulation(free: number[], { replicas, gpus, sameNode }: GpuDemand): boolean {
    // Asking for no GPU, it fits anywhere, GPU nodes or none.
    if (gpus === 0) return true;
    if (sameNode) return replicas * gpus === 0 || free.some((f) => f >= replicas * gpus);
    const left = [...free];
    for (let r = 0; r < replicas; r++) {
      const i = left.indexOf(Math.max(-1, ...left));
      if (i < 0 || left[i]! < gpus) return false;
      left[i]! -= gpus;
    }
    return true;
  }

  const demands = fc.record({
    replicas: fc.integer({ min: 0, max: 6 }),
    gpus: fc.integer({ min: 0, max: 8 }),
    sameNode: fc.boolean(),
  });
  const answers = fc.array(
    fc.oneof(fc.array(fc.integer({ min: 0, max: 8 }), { maxLength: 5 }), fc.constant('unanswered' as const)),
    { minLength: 1, maxLength: 6 },
  );

  it('chooses only where the demand fits, the most left, the first of equals; none only when nothing fits', () => {
    fc.assert(
      fc.property(demands, answers, (demand, raw) => {
        const given = raw.map((a, i) =>
          a === 'unanswered' ? { cluster: `c${i}`, unanswered: 'no worker' } : cluster(`c${i}`, ...a),
        );
        const choice = choosePlacement(demand, given);
        const fitting = raw.flatMap((a, i) =>
          a !== 'unanswered' && fitsBySimulation(a, demand)
            ? [{ i, left: a.reduce((s, f) => s + f, 0) - demand.replicas * demand.gpus }]
            : [],
        );
        if (fitting.length === 0) {
          expect(choice.cluster).toBeUndefined();
          for (let i = 0; i < raw.length; i++) expect(choice.reason).toContain(`c${i}: `);
          return;
        }
        const most = Math.max(...fitting.map((f) => f.left));
        expect(choice.cluster).toBe(`c${fitting.find((f) => f.left === most)!.i}`);
        const chosen = raw[Number(choice.cluster!.slice(1))] as number[];
        expect(
          leftAfterPlacing(
            chosen.map((f, i) => node(`n${i}`, f)),
            demand,
          ),
        ).toBe(most);
      }),
      { numRuns: 500 },
    );
  });
});

const gpuNode = (name: string, gpus: string, extra: Partial<V1Node> = {}, ready = 'True'): V1Node => ({
  metadata: { name, labels: { zone: name.endsWith('a') ? 'a' : 'b' } },
  spec: {},
  status: { allocatable: { 'nvidia.com/gpu': gpus }, conditions: [{ type: 'Ready', status: ready }] },
  ...extra,
});
const pod = (nodeName: string | undefined, gpus: string, phase = 'Running', init?: string): V1Pod => ({
  spec: {
    ...(nodeName ? { nodeName } : {}),
    containers: [{ name: 'c', resources: { requests: { 'nvidia.com/gpu': gpus } } }],
    ...(init ? { initContainers: [{ name: 'i', resources: { limits: { 'nvidia.com/gpu': init } } }] } : {}),
  },
  status: { phase },
});
const gpu = { resource: 'nvidia.com/gpu' };

describe('nodeCapacities', () => {
  it('counts allocatable GPUs less what the bound pods that have not ended ask for', () => {
    const nodes = [gpuNode('node-a', '4'), gpuNode('node-b', '4')];
    const pods = [
      pod('node-a', '1'),
      pod('node-a', '1', 'Pending'),
      pod('node-a', '2', 'Succeeded'),
      pod('node-b', '2', 'Failed'),
      pod(undefined, '4', 'Pending'),
      pod('node-b', '0', 'Running', '3'),
    ];
    expect(nodeCapacities(nodes, pods, gpu)).toEqual([
      { name: 'node-a', allocatable: 4, free: 2 },
      { name: 'node-b', allocatable: 4, free: 1 },
    ]);
  });

  it('leaves out nodes that are not Ready, cordoned, without GPUs, off the selector, or tainted against the model', () => {
    const taint = { key: 'nvidia.com/gpu', value: 'present', effect: 'NoSchedule' };
    const nodes = [
      gpuNode('not-ready-a', '4', {}, 'False'),
      gpuNode('cordoned-a', '4', { spec: { unschedulable: true } }),
      gpuNode('cpu-only-a', '0'),
      gpuNode('other-zone-b', '4'),
      gpuNode('tainted-a', '4', { spec: { taints: [taint] } }),
      gpuNode('preferred-a', '4', { spec: { taints: [{ ...taint, effect: 'PreferNoSchedule' }] } }),
    ];
    const names = (input: Parameters<typeof nodeCapacities>[2]) => nodeCapacities(nodes, [], input).map((n) => n.name);
    expect(names({ ...gpu, nodeSelector: { zone: 'a' } })).toEqual(['preferred-a']);
    const tolerates = [{ key: 'nvidia.com/gpu', operator: 'Exists' as const }];
    expect(names({ ...gpu, nodeSelector: { zone: 'a' }, tolerations: tolerates })).toEqual([
      'tainted-a',
      'preferred-a',
    ]);
    const wrongValue = [{ key: 'nvidia.com/gpu', operator: 'Equal' as const, value: 'absent' }];
    expect(names({ ...gpu, nodeSelector: { zone: 'a' }, tolerations: wrongValue })).toEqual(['preferred-a']);
    expect(names(gpu)).toEqual(['other-zone-b', 'preferred-a']);
  });

  it('never counts a node as more than empty, or less than full', () => {
    const over = nodeCapacities([gpuNode('node-a', '2')], [pod('node-a', '3')], gpu);
    expect(over).toEqual([{ name: 'node-a', allocatable: 2, free: 0 }]);
  });
});
