// The worker's autoscaler (activities/scaling/autoscaler.ts), one round at a time over a fake watch, fake endpoints
// and fake /metrics answers: a model that may go to zero has its front read first, goes to zero after idleToZeroAfter
// with no request, wakes at once from zero when its front holds one, and never goes to zero on a front it could not
// read; a decision is sent once until it is seen applied; a model without idleToZeroAfter never has its front read.
import type { V1Deployment, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { ENGINE_CONTAINER } from '../../activities/builders/deployment.js';
import { FRONT_METRICS_PORT, frontSelectorLabels } from '../../activities/builders/front-objects.js';
import { ANNOTATION_SCALING, LABEL_COMPONENT, LABEL_MODEL, selectorLabels } from '../../activities/builders/labels.js';
import type { ModelWatcher } from '../../activities/cluster/model-watcher.js';
import type { EndpointResolver } from '../../activities/deps.js';
import { Autoscaler } from '../../activities/scaling/autoscaler.js';
import type { ScaleDecision, ScalingPolicy } from '../../workflows/contract/index.js';

const NS = 'team';
const NAME = 'm';
const ENGINE_PORT = 8000;
const MINUTE = 60_000;
const IDLE = 30 * MINUTE;
/** What a pod that does not answer gives: a 500. */
const DOWN = null;

/** Idle to zero after 30 minutes; the engine's own scale-down waits longer, so it never gets in the way here. */
const POLICY: ScalingPolicy = {
  minReplicas: 1,
  maxReplicas: 4,
  targetConcurrency: 2,
  scaleUpAfterMs: 15_000,
  scaleDownAfterMs: 120 * MINUTE,
  idleToZeroAfterMs: IDLE,
};

const vllm = (running: number, waiting = 0) =>
  [
    '# HELP vllm:num_requests_running Number of requests in model execution batches.',
    `vllm:num_requests_running{model_name="${NAME}"} ${running}`,
    `vllm:num_requests_waiting{model_name="${NAME}"} ${waiting}`,
  ].join('\n');

const haproxy = (requests: number, inFlight = 0) =>
  [
    '# HELP haproxy_frontend_http_requests_total Total number of HTTP requests received.',
    `haproxy_frontend_http_requests_total{proxy="model"} ${requests}`,
    `haproxy_frontend_http_requests_total{proxy="stats"} 999`,
    `haproxy_backend_current_sessions{proxy="engine"} ${inFlight}`,
  ].join('\n');

function readyPod(name: string, labels: Record<string, string>, ip: string): V1Pod {
  return {
    metadata: { name, namespace: NS, labels },
    status: { podIP: ip, conditions: [{ type: 'Ready', status: 'True' }] },
  };
}

function engineDeployment(policy: ScalingPolicy, replicas: number): V1Deployment {
  return {
    metadata: {
      name: NAME,
      namespace: NS,
      labels: { ...selectorLabels(NAME), [LABEL_COMPONENT]: 'engine', [LABEL_MODEL]: NAME },
      annotations: { [ANNOTATION_SCALING]: JSON.stringify(policy) },
    },
    spec: {
      replicas,
      selector: { matchLabels: selectorLabels(NAME) },
      template: {
        spec: { containers: [{ name: ENGINE_CONTAINER, image: 'vllm', ports: [{ containerPort: ENGINE_PORT }] }] },
      },
    },
  };
}

/**
 * One model in one namespace: its engine Deployment, engine pods and front pods, what each pod answers on /metrics
 * (a text, or DOWN for a pod that does not answer), every URL fetched and every decision sent.
 */
function setup(policy: ScalingPolicy, replicas: number) {
  let deployment = engineDeployment(policy, replicas);
  let enginePods: V1Pod[] = [];
  let frontPods: V1Pod[] = [];
  const answers = new Map<string, string | typeof DOWN>();
  const fetched: string[] = [];
  const sent: ScaleDecision[] = [];
  const warnings: string[] = [];
  let clock = 0;

  const matches = (labels: Record<string, string> | undefined, selector: string) =>
    selector.split(',').every((term) => {
      const [k, v] = term.split('=');
      return labels?.[k!] === v;
    });
  const watcher = {
    watchedNamespaces: [NS],
    list(kind: string, namespace: string, selector: string) {
      if (namespace !== NS) return [];
      const objects = kind === 'Deployment' ? [deployment] : kind === 'Pod' ? [...enginePods, ...frontPods] : [];
      return objects.filter((o) => matches(o.metadata?.labels, selector));
    },
  } as unknown as ModelWatcher;
  const endpoints: EndpointResolver = async (model, pod) => `http://${pod!.name}:${model.spec.engine.port}`;
  const http = (async (input: string | URL | Request) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    fetched.push(url);
    const host = new URL(url).host;
    const answer = answers.get(host);
    if (answer === undefined) throw new Error(`nothing answers at ${url}`);
    if (answer === DOWN) return new Response('unavailable', { status: 500 });
    return new Response(answer);
  }) as typeof fetch;
  const autoscaler = new Autoscaler({
    watcher,
    endpoints,
    http,
    intervalMs: 5_000,
    now: () => clock,
    send: async (model, decision) => {
      expect(model).toEqual({ namespace: NS, name: NAME });
      sent.push(decision);
    },
    log: (level, message) => {
      if (level === 'warn') warnings.push(message);
    },
  });

  return {
    sent,
    fetched,
    warnings,
    /** `count` ready engine pods, each answering `text`. */
    engine(count: number, text: string | typeof DOWN = vllm(0)) {
      enginePods = Array.from({ length: count }, (_, i) =>
        readyPod(`${NAME}-engine-${i}`, selectorLabels(NAME), `10.0.0.${i}`),
      );
      for (const pod of enginePods) answers.set(`${pod.metadata!.name}:${ENGINE_PORT}`, text);
    },
    /** One ready front pod per answer. */
    front(...texts: (string | typeof DOWN)[]) {
      frontPods = texts.map((_, i) => readyPod(`${NAME}-front-${i}`, frontSelectorLabels(NAME), `10.0.1.${i}`));
      texts.forEach((text, i) => answers.set(`${NAME}-front-${i}:${FRONT_METRICS_PORT}`, text));
    },
    /** The Deployment's count now (a decision applied). */
    scaledTo(count: number) {
      deployment = engineDeployment(policy, count);
    },
    /** One round at `minutes` after the start. */
    async round(minutes: number) {
      clock = minutes * MINUTE;
      await autoscaler.tick();
    },
  };
}

describe('the autoscaler, for a model that may go to zero', () => {
  it('sends one decision to zero once its front has taken no request and held none for idleToZeroAfter', async () => {
    const model = setup(POLICY, 2);
    model.engine(2);
    model.front(haproxy(6), haproxy(4));
    for (const minutes of [0, 10, 29]) await model.round(minutes);
    expect(model.sent).toEqual([]);
    const before = model.fetched.length;
    await model.round(30);
    expect(model.sent).toEqual([{ replicas: 0, from: 2, reason: 'no request for 30m 00s (idleToZeroAfter 30m 00s)' }]);
    // Both replicas were read too: zero only on an engine known to be idle.
    expect(model.fetched.slice(before).filter((url) => url.includes(`:${ENGINE_PORT}/`))).toHaveLength(2);
    // Not applied yet: the same decision is not sent again on the next round.
    await model.round(30.1);
    expect(model.sent).toHaveLength(1);
    expect(model.fetched).toContain(`http://${NAME}-front-0:${FRONT_METRICS_PORT}/metrics`);
  });

  it('never goes to zero while its replicas serve requests that did not come through the front, nor on one it could not read', async () => {
    const model = setup(POLICY, 1);
    model.front(haproxy(6));
    // A request sent to a pod, not through the front: the front sees none, the engine has it in flight.
    model.engine(1, vllm(1));
    for (const minutes of [0, 20, 40, 60]) await model.round(minutes);
    expect(model.sent).toEqual([]);
    // They end: the quiet clock starts at the last reading that saw them.
    model.engine(1, vllm(0));
    await model.round(89);
    expect(model.sent).toEqual([]);
    // A replica that does not answer may be serving: no zero on it.
    model.engine(1, DOWN);
    await model.round(95);
    expect(model.sent).toEqual([]);
    model.engine(1, vllm(0));
    await model.round(96);
    expect(model.sent).toEqual([expect.objectContaining({ replicas: 0, from: 1 })]);
  });

  it('starts the quiet clock at its first reading of the front, not at the start of the worker', async () => {
    const model = setup(POLICY, 1);
    model.engine(1);
    model.front(haproxy(6));
    await model.round(100);
    await model.round(129);
    expect(model.sent).toEqual([]);
    await model.round(130);
    expect(model.sent).toEqual([expect.objectContaining({ replicas: 0, from: 1 })]);
  });

  it('stays up while the front takes requests, and goes to zero idleToZeroAfter after the last one', async () => {
    const model = setup(POLICY, 2);
    model.engine(2);
    for (let minutes = 0; minutes <= 60; minutes += 10) {
      model.front(haproxy(minutes), haproxy(0));
      await model.round(minutes);
    }
    await model.round(89);
    expect(model.sent).toEqual([]);
    await model.round(90);
    expect(model.sent).toEqual([expect.objectContaining({ replicas: 0, from: 2 })]);
  });

  it('stays up while a request is in the front, even with no new one taken', async () => {
    const model = setup(POLICY, 2);
    model.engine(2, vllm(1));
    model.front(haproxy(3, 1));
    for (const minutes of [0, 30, 60]) await model.round(minutes);
    expect(model.sent).toEqual([]);
  });

  it('at zero, wakes to minReplicas on the same round its front holds a request', async () => {
    const model = setup({ ...POLICY, minReplicas: 2 }, 0);
    model.front(haproxy(6));
    await model.round(0);
    await model.round(60);
    expect(model.sent).toEqual([]);
    model.front(haproxy(6, 1));
    await model.round(61);
    expect(model.sent).toEqual([{ replicas: 2, from: 0, reason: 'a request held at zero: 0 → 2 at once' }]);
    // Not applied yet: not sent again.
    await model.round(61.1);
    expect(model.sent).toHaveLength(1);
  });

  it('goes to zero, then wakes from it when the next request comes', async () => {
    const model = setup(POLICY, 1);
    model.engine(1);
    model.front(haproxy(6));
    await model.round(0);
    await model.round(30);
    expect(model.sent).toEqual([expect.objectContaining({ replicas: 0, from: 1 })]);
    model.scaledTo(0);
    model.engine(0);
    await model.round(45);
    expect(model.sent).toHaveLength(1);
    model.front(haproxy(6, 1));
    await model.round(46);
    expect(model.sent.at(-1)).toEqual(expect.objectContaining({ replicas: 1, from: 0 }));
    expect(model.sent).toHaveLength(2);
  });

  it('never goes to zero while one of its front pods does not answer', async () => {
    const model = setup(POLICY, 2);
    model.engine(2);
    model.front(haproxy(6), DOWN);
    for (const minutes of [0, 10, 30, 40, 90]) await model.round(minutes);
    expect(model.sent).toEqual([]);
    expect(model.fetched).toContain(`http://${NAME}-front-1:${FRONT_METRICS_PORT}/metrics`);
  });

  it('never goes to zero on a front that answers without the counts, nor with no front pod ready', async () => {
    const model = setup(POLICY, 2);
    model.engine(2);
    model.front('haproxy_process_uptime_seconds 12');
    for (const minutes of [0, 30, 60]) await model.round(minutes);
    model.front();
    for (const minutes of [61, 100]) await model.round(minutes);
    expect(model.sent).toEqual([]);
  });

  it('does not wake at zero on a front it could not read', async () => {
    const model = setup(POLICY, 0);
    model.front(haproxy(6, 1), DOWN);
    await model.round(0);
    expect(model.sent).toEqual([]);
  });

  it('still scales up on its engine load while its front is busy', async () => {
    const model = setup(POLICY, 2);
    model.engine(2, vllm(4, 1));
    model.front(haproxy(10, 10));
    for (const seconds of [0, 5, 10]) await model.round(seconds / 60);
    expect(model.sent).toEqual([]);
    await model.round(15 / 60);
    expect(model.sent).toEqual([expect.objectContaining({ replicas: 4, from: 2 })]);
  });

  it('cannot read a policy whose idleToZeroAfterMs is not a positive number, and decides nothing on it', async () => {
    for (const idleToZeroAfterMs of [0, -1, 'soon']) {
      const model = setup({ ...POLICY, idleToZeroAfterMs } as unknown as ScalingPolicy, 2);
      model.engine(2, vllm(10));
      model.front(haproxy(6));
      for (const seconds of [0, 30, 60]) await model.round(seconds / 60);
      expect(model.sent).toEqual([]);
      expect(model.fetched).toEqual([]);
      expect(model.warnings).toContain('a Deployment carries a scaling policy that cannot be read');
    }
  });
});

describe('the autoscaler, for a model that may not go to zero', () => {
  it('never reads its front, and scales on its engine load as before', async () => {
    const { idleToZeroAfterMs: _, ...policy } = POLICY;
    const model = setup(policy, 2);
    model.engine(2, vllm(4, 1));
    model.front(haproxy(6));
    for (const seconds of [0, 5, 10]) await model.round(seconds / 60);
    expect(model.sent).toEqual([]);
    await model.round(15 / 60);
    expect(model.sent).toEqual([expect.objectContaining({ replicas: 4, from: 2 })]);
    for (const minutes of [30, 60, 120]) await model.round(minutes);
    expect(model.fetched.length).toBeGreaterThan(0);
    expect(model.fetched.filter((url) => url.includes(`:${FRONT_METRICS_PORT}/`))).toEqual([]);
  });
});
