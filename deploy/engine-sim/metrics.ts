// A handful of vLLM's Prometheus series, under vLLM's names and labels, so scrapers and autoscalers configured for
// the real engine find what they expect. The counters count what the stand-in really served.
import type { FinishReason } from './synthetic-text.js';

export interface EngineMetricsView {
  readonly requestsRunning: number;
  readonly requestsWaiting: number;
  readonly promptTokens: number;
  readonly generationTokens: number;
  readonly successByFinishReason: ReadonlyMap<FinishReason, number>;
}

/** Where the two gauges come from: the scheduler, which alone knows what runs and what waits. */
export interface SchedulerLoad {
  readonly running: number;
  readonly waiting: number;
}

export class EngineMetrics implements EngineMetricsView {
  promptTokens = 0;
  generationTokens = 0;
  readonly successByFinishReason = new Map<FinishReason, number>();

  constructor(private readonly load: SchedulerLoad) {}

  get requestsRunning(): number {
    return this.load.running;
  }

  get requestsWaiting(): number {
    return this.load.waiting;
  }

  recordSuccess(promptTokens: number, generationTokens: number, finishReasons: readonly FinishReason[]) {
    this.promptTokens += promptTokens;
    this.generationTokens += generationTokens;
    for (const reason of finishReasons) {
      this.successByFinishReason.set(reason, (this.successByFinishReason.get(reason) ?? 0) + 1);
    }
  }

  /** Prometheus text exposition (format 0.0.4), labelled like vLLM's V1 engine: `engine` and `model_name`. */
  render(modelName: string): string {
    const labels = `engine="0",model_name="${escapeLabel(modelName)}"`;
    const lines: string[] = [];
    const family = (name: string, type: 'gauge' | 'counter', help: string) => {
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    };
    family('vllm:num_requests_running', 'gauge', 'Number of requests in model execution batches.');
    lines.push(`vllm:num_requests_running{${labels}} ${formatValue(this.requestsRunning)}`);
    family('vllm:num_requests_waiting', 'gauge', 'Number of requests waiting to be processed.');
    lines.push(`vllm:num_requests_waiting{${labels}} ${formatValue(this.requestsWaiting)}`);
    family('vllm:prompt_tokens_total', 'counter', 'Number of prefill tokens processed.');
    lines.push(`vllm:prompt_tokens_total{${labels}} ${formatValue(this.promptTokens)}`);
    family('vllm:generation_tokens_total', 'counter', 'Number of generation tokens processed.');
    lines.push(`vllm:generation_tokens_total{${labels}} ${formatValue(this.generationTokens)}`);
    family('vllm:request_success_total', 'counter', 'Count of successfully processed requests.');
    for (const reason of ['stop', 'length'] as const) {
      const count = this.successByFinishReason.get(reason) ?? 0;
      lines.push(`vllm:request_success_total{${labels},finished_reason="${reason}"} ${formatValue(count)}`);
    }
    return `${lines.join('\n')}\n`;
  }
}

// prometheus_client (which vLLM uses) prints every sample as a float.
function formatValue(value: number): string {
  return Number.isInteger(value) ? value.toFixed(1) : String(value);
}

function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}
