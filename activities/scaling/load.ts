// One replica's load as vLLM reports it on /metrics (Prometheus text): the requests running and waiting. Pure.

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
    if (line.startsWith('#') || line.length === 0) continue;
    const match = /^([^\s{]+)(?:\{.*\})?\s+(\S+)/.exec(line);
    if (!match || (match[1] !== RUNNING && match[1] !== WAITING)) continue;
    const value = Number(match[2]);
    if (!Number.isFinite(value)) continue;
    sum += value;
    seen = true;
  }
  return seen ? sum : undefined;
}
