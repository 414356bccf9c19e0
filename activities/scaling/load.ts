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

/** One revision's answers through a front pod since it started, as HAProxy's exporter counts them for its server. */
export interface ServerCounts {
  /** Requests sent to it: those it answered, those whose connection or response broke, those sent on elsewhere. */
  requests: number;
  /** Responses it sent (any status). */
  answered: number;
  /**
   * 5xx responses, connections it refused or broke, responses it broke off, and requests it refused that the front then
   * sent to another revision (`option redispatch`: the client saw no failure, the revision failed it all the same).
   */
  failed: number;
  /** HAProxy's average response time over the server's last 1024 requests, in ms; unset before it answered. */
  averageMs?: number;
}

/** Every server of the front's `engine` backend (one per revision, named after it) in an exporter's answer. */
export function frontServers(text: string): Record<string, ServerCounts> {
  const servers: Record<string, ServerCounts> = {};
  for (const line of text.split('\n')) {
    const s = sample(line);
    if (!s?.name.startsWith('haproxy_server_') || !s.labels.includes('proxy="engine"')) continue;
    const server = /server="([^"]+)"/.exec(s.labels)?.[1];
    if (!server) continue;
    const counts = (servers[server] ??= { requests: 0, answered: 0, failed: 0 });
    if (s.name === 'haproxy_server_http_responses_total') {
      counts.requests += s.value;
      counts.answered += s.value;
      if (s.labels.includes('code="5xx"')) counts.failed += s.value;
    } else if (
      s.name === 'haproxy_server_connection_errors_total' ||
      s.name === 'haproxy_server_response_errors_total' ||
      s.name === 'haproxy_server_redispatch_warnings_total'
    ) {
      counts.requests += s.value;
      counts.failed += s.value;
    } else if (s.name === 'haproxy_server_response_time_average_seconds') {
      counts.averageMs = s.value * 1000;
    }
  }
  return servers;
}
