// One replica's load as vLLM reports it on /metrics (Prometheus text): the requests running and waiting; and a model's
// front's, as HAProxy's exporter reports it (activities/builders/front.ts). Pure.

const RUNNING = 'vllm:num_requests_running';
const WAITING = 'vllm:num_requests_waiting';

/**
 * `vllm:num_requests_running` + `vllm:num_requests_waiting` from a /metrics answer, summed over the engine's label
 * sets; undefined when it has neither gauge (not vLLM, or not yet).
 */
export function replicaLoad(text: string): number | undefined {
  let sum = 0;
  let seen = false;
  for (const line of text.split('\n')) {
    const s = sample(line);
    if (s?.name !== RUNNING && s?.name !== WAITING) continue;
    sum += s.value;
    seen = true;
  }
  return seen ? sum : undefined;
}

/** A sample's name, labels and value in a line of Prometheus text; undefined for comments and what does not parse. */
function sample(line: string): { name: string; labels: string; value: number } | undefined {
  if (line.startsWith('#')) return undefined;
  const match = /^([^\s{]+)(?:\{(.*)\})?\s+(\S+)/.exec(line);
  const value = Number(match?.[3]);
  return match && Number.isFinite(value) ? { name: match[1]!, labels: match[2] ?? '', value } : undefined;
}

/**
 * What a model's front reports on its exporter: the requests in it now — held while no replica answers, waiting in
 * its queue, or being served — and every request it has taken since it started. Undefined when either is missing.
 */
export function frontLoad(text: string): { inFlight: number; requests: number } | undefined {
  let inFlight: number | undefined;
  let requests: number | undefined;
  for (const line of text.split('\n')) {
    const s = sample(line);
    if (s?.name === 'haproxy_backend_current_sessions' && s.labels.includes('proxy="engine"')) inFlight = s.value;
    if (s?.name === 'haproxy_frontend_http_requests_total' && s.labels.includes('proxy="model"')) requests = s.value;
  }
  return inFlight === undefined || requests === undefined ? undefined : { inFlight, requests };
}
