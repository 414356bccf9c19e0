// A rollout's health gate on the front's counts (workflows/steps/health-gate.ts): what fails a candidate beside the
// current revision — a failed share above 1 % and above the current one's, an average more than twice as slow — and
// what it says. The counts themselves are checked against a real HAProxy in test/integration/front/split.test.ts.
import { describe, expect, it } from 'vitest';
import { frontServers } from '../../activities/scaling/load.js';
import { judgeFront } from '../../workflows/steps/health-gate.js';

const counts = (requests: number, failed: number, averageMs?: number) => ({
  requests,
  answered: requests,
  failed,
  ...(averageMs !== undefined ? { averageMs } : {}),
});
const judge = (candidate: ReturnType<typeof counts>, current: ReturnType<typeof counts>) =>
  judgeFront({ pods: 2, revisions: { r2: candidate, r1: current } }, 'r2', 'r1');

describe("a rollout's health gate on the front's counts", () => {
  it('passes a candidate that fails no more than 1 %, or no more than the current revision, and says the counts', () => {
    expect(judge(counts(200, 2, 120), counts(800, 0, 100))).toEqual({
      result: 'Passed',
      message:
        'through the front r2: 2 of 200 requests failed (1 %), 120 ms on average; r1: 0 of 800 requests failed (0 %), 100 ms on average',
    });
    // Both failing alike is the clients' doing (or the cluster's), not the candidate's.
    expect(judge(counts(100, 5), counts(400, 40))).toMatchObject({ result: 'Passed' });
  });

  it('fails a candidate whose failed share is above 1 % and above the current revision', () => {
    expect(judge(counts(100, 7), counts(400, 1))).toEqual({
      result: 'Failed',
      message:
        "more than 1 % of r2's requests failed, through the front r2: 7 of 100 requests failed (7 %); r1: 1 of 400 requests failed (0.3 %)",
    });
  });

  it('fails a candidate more than twice as slow, given enough answers of each', () => {
    expect(judge(counts(40, 0, 900), counts(160, 0, 300))).toMatchObject({
      result: 'Failed',
      message: expect.stringMatching(/^r2 answered more than 2× slower, through the front r2: 0 of 40 .* 900 ms/),
    });
    // Too few answers, or both quick: not judged on speed.
    expect(judge(counts(10, 0, 900), counts(160, 0, 300))).toMatchObject({ result: 'Passed' });
    expect(judge(counts(40, 0, 30), counts(160, 0, 10))).toMatchObject({ result: 'Passed' });
  });

  it('passes a candidate no request reached, fails when the counts cannot be read, and judges nothing unasked', () => {
    expect(judge(counts(0, 0), counts(50, 0))).toEqual({
      result: 'Passed',
      message: 'no request reached r2 through the front yet',
    });
    expect(judgeFront({ unread: 'front pod x: timed out' }, 'r2', 'r1')).toEqual({
      result: 'Failed',
      message: "the front's counts could not be read: front pod x: timed out",
    });
    expect(judgeFront(undefined, 'r2', 'r1')).toBeUndefined();
  });

  it("reads each revision's counts from HAProxy's exporter: answers, 5xx, broken or redispatched, the average", () => {
    const text = [
      '# HELP haproxy_server_http_responses_total Total number of HTTP responses.',
      'haproxy_server_http_responses_total{proxy="engine",server="r1",code="2xx"} 30',
      'haproxy_server_http_responses_total{proxy="engine",server="r1",code="5xx"} 2',
      'haproxy_server_http_responses_total{proxy="engine",server="r2",code="2xx"} 5',
      'haproxy_server_connection_errors_total{proxy="engine",server="r2"} 3',
      'haproxy_server_response_errors_total{proxy="engine",server="r2"} 1',
      'haproxy_server_redispatch_warnings_total{proxy="engine",server="r2"} 2',
      'haproxy_server_response_time_average_seconds{proxy="engine",server="r1"} 0.250000',
      'haproxy_server_http_responses_total{proxy="other",server="r1",code="5xx"} 99',
    ].join('\n');
    expect(frontServers(text)).toEqual({
      r1: { requests: 32, answered: 32, failed: 2, averageMs: 250 },
      r2: { requests: 11, answered: 5, failed: 6 },
    });
  });
});
