// checkTenantGrant: a tenant's ensure, checked on the model's own cluster before the model is started or changed
// (docs/security.md). The Nexus handler has checked what the document alone shows; what only the cluster knows — the
// labels of the Secrets and PVCs a grant allows by label — is checked here, by the worker of that cluster, with its
// tenants file. Nothing is created either way.
import { FAILURE, failure, formatSpecIssues, safeParseServedModel } from '../../workflows/contract/index.js';
import type { ActivityDeps } from '../deps.js';

export async function checkTenantGrant(
  deps: ActivityDeps,
  { tenant, document }: { tenant: string; document: unknown },
): Promise<void> {
  const parsed = safeParseServedModel(document);
  if (!parsed.ok) throw failure(FAILURE.InvalidSpec, formatSpecIssues(parsed.issues));
  const model = parsed.model;
  if (!deps.grants) {
    throw failure(
      FAILURE.Forbidden,
      `the worker of cluster ${model.spec.cluster} has no tenants file: it cannot check tenant ${tenant}'s grant`,
    );
  }
  const refusal = await deps.grants(tenant, model);
  if (refusal) throw failure(FAILURE.Forbidden, refusal);
}
