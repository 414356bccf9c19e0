// spec.placement: the clusters Ferry may serve a model on, one chosen once, at its start, by the free GPUs of each
// (docs/design/fleet.md, §3, "Placement at start"). Pure.
import { z } from 'zod';
import { parserOnly } from './parser-only.js';
import { dnsLabel, strict } from './rules.js';

/** At most this many clusters in `spec.placement.clusters`: one capacity reading each, once per model. */
export const MAX_PLACEMENT_CLUSTERS = 16;

export const clusterPlacementSchema = strict({
  clusters: z
    .array(dnsLabel('cluster name (it picks the worker and task queue)', 'east'))
    .min(1, 'must name at least one cluster')
    .max(MAX_PLACEMENT_CLUSTERS, `must name at most ${MAX_PLACEMENT_CLUSTERS} clusters`)
    .superRefine((clusters, ctx) => {
      clusters.forEach((cluster, index) => {
        if (clusters.indexOf(cluster) !== index) {
          ctx.addIssue({
            code: 'custom',
            path: [index],
            message: `${cluster} is listed twice`,
            params: parserOnly('listed-once'),
          });
        }
      });
    })
    .describe(
      'The clusters the model may be served on, each once: the one where its replicas fit, each on one node, with the most GPUs left is chosen; a tie goes to the one listed first. The first listed whose worker answers runs the placement.',
    ),
});

export type ClusterPlacement = z.output<typeof clusterPlacementSchema>;
