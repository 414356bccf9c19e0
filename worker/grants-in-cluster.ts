// A tenant's grant as the worker of one cluster checks it (docs/security.md): the tenants file, and what only the
// cluster knows, the labels of the Secrets and PVCs a grant allows by label. For the look, and for `checkTenantGrant`.
import { ApplicationFailure } from '@temporalio/common';
import type { Cluster } from '../activities/cluster/api.js';
import { FAILURE } from '../workflows/contract/index.js';
import type { ActivityDeps } from '../activities/deps.js';
import { grantRefusal, labelledObjects, labelRefusal, type Tenants } from './tenants.js';

/**
 * A check of a tenant's model against the grants the worker holds now (a tenant no longer listed has none), with the
 * labels of the Secrets and PVCs its grant allows by label as this cluster has them (metadata only).
 */
export function grantsInCluster(tenants: Tenants, cluster: Cluster): NonNullable<ActivityDeps['grants']> {
  return async (tenant, model) => {
    const grant = tenants.find((t) => t.name === tenant);
    if (!grant) return `tenant ${tenant} has no grant in this worker's tenants file`;
    const refusal = grantRefusal(grant, model);
    if (refusal) return refusal;
    const objects = labelledObjects(grant, model);
    let labels: (Record<string, string> | undefined)[];
    try {
      labels = await Promise.all(
        objects.map(({ kind, name }) =>
          cluster.labelsOf({
            apiVersion: 'v1',
            kind,
            plural: kind === 'Secret' ? 'secrets' : 'persistentvolumeclaims',
            name,
            namespace: model.metadata.namespace,
          }),
        ),
      );
    } catch (err) {
      // Labels the worker may not read cannot allow anything (deny by default); anything else is retried.
      if (err instanceof ApplicationFailure && err.type === FAILURE.Forbidden) {
        return `tenant ${tenant}'s grant allows objects by label, and this worker may not read them: ${err.message}`;
      }
      throw err;
    }
    return labelRefusal(
      grant,
      model,
      (kind, name) => labels[objects.findIndex((o) => o.kind === kind && o.name === name)],
    );
  };
}
