// How a failed Kubernetes call becomes a failure: the API server's own trouble is retried, the object's is not.
import { describe, expect, it } from 'vitest';
import { kubeFailure } from '../../activities/cluster/errors.js';
import { FAILURE } from '../../workflows/contract/index.js';

/** What client-node throws for an answer with a Status body. */
const apiError = (code: number, message: string) => ({
  code,
  body: JSON.stringify({ kind: 'Status', status: 'Failure', reason: 'Invalid', code, message }),
  headers: {},
});

describe('kubeFailure', () => {
  it('a 422 the API server gives while it shuts down (cluster IP allocation) is retried', () => {
    const err = kubeFailure(
      apiError(
        422,
        'Service "r-k0" is invalid: spec.clusterIPs: Invalid value: [""]: failed to allocate IP: Post ' +
          '"https://127.0.0.1:16443/apis/networking.k8s.io/v1/ipaddresses": dial tcp 127.0.0.1:16443: connect: connection refused',
      ),
      'applying Service ns/r-k0',
    );
    expect(err).toMatchObject({ type: FAILURE.KubernetesAllocationFailed, nonRetryable: false });
    expect(err.message).toMatch(/^applying Service ns\/r-k0: .*connection refused$/);
  });

  it.each([
    'spec.clusterIPs: Invalid value: ["10.0.0.10"]: failed to allocate IP 10.0.0.10: provided IP is already allocated',
    'spec.clusterIPs: Invalid value: ["10.9.0.1"]: failed to allocate IP 10.9.0.1: provided IP (10.9.0.1) is not in the valid range',
    'spec.clusterIPs: Invalid value: [""]: failed to allocate IP: range is full',
    'spec.ports[0].nodePort: Invalid value: 30000: provided port is already allocated',
  ])('an allocation a person must fix stays a rejection: %s', (message) => {
    const err = kubeFailure(apiError(422, `Service "m" is invalid: ${message}`), 'applying Service ns/m');
    expect(err).toMatchObject({ type: FAILURE.KubernetesRejected, nonRetryable: true });
  });

  it('any other 422 is a rejection, a 503 is retried, a network error is retried', () => {
    expect(kubeFailure(apiError(422, 'ConfigMap "x" is invalid: data[not a key!]: Invalid value'), 'x')).toMatchObject({
      type: FAILURE.KubernetesRejected,
      nonRetryable: true,
    });
    expect(kubeFailure(apiError(503, 'unavailable'), 'x')).toMatchObject({
      type: 'KubernetesHttp503',
      nonRetryable: false,
    });
    expect(kubeFailure(new Error('connect ECONNREFUSED'), 'x')).toMatchObject({
      type: FAILURE.KubernetesUnreachable,
      nonRetryable: false,
    });
  });
});
