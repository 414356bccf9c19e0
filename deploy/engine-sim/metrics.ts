// A handful of vLLM's Prometheus series, under vLLM 0.32's names, labels and types, so scrapers, autoscalers and an
// inference gateway's endpoint picker configured for the real engine find what they expect. The counters count what
// the stand-in really served; the gauges come from its capacity model.
import type { FinishReason } from './synthetic-text.js';

export interface EngineMetricsView {
  readonly requestsRunning: number;
  readonly requestsWaiting: number;
  readonly kvCacheUsage: number;
  readonly promptTokens: number;
  readonly generationTokens: number;
  readonly successByFinishReason: ReadonlyMap<FinishReason, number>;
}

/** Where the gauges come from: the scheduler, which alone knows what runs, what waits and what it holds. */
export interface SchedulerLoad {
  readonly running: number;
  readonly waiting: number;
  /** The KV cache's use, 0 to 1. */
  readonly kvCacheUsage: number;
  /** The adapters of the requests in flight (running or waiting), in the order they arrived. */
  readonly lorasInFlight: readonly string[];
  /** Called on every change of what runs and waits (vLLM refreshes its LoRA series on every engine step). */
  onChange(listener: () => void): void;
}

/** Every `finished_reason` vLLM 0.32 labels `vllm:request_success_total` with, in its order. */
const FINISHED_REASONS = ['stop', 'length', 'abort', 'error', 'repetition'] as const;

export class EngineMetrics implements EngineMetricsView {
  promptTokens = 0;
  generationTokens = 0;
  readonly successByFinishReason = new Map<FinishReason, number>();
  /** `vllm:lora_requests_info`: each label set seen, with the last time (seconds) it was the current one. */
  private readonly loraInfo = new Map<string, number>();

  /** `maxLoras` set (LoRA enabled) adds vLLM's `vllm:lora_requests_info`, as `--enable-lora` does. */
  constructor(
    private readonly load: SchedulerLoad,
    private readonly maxLoras?: number,
  ) {
    if (maxLoras !== undefined) load.onChange(() => this.recordLoraInfo());
  }

  get requestsRunning(): number {
    return this.load.running;
  }

  get requestsWaiting(): number {
    return this.load.waiting;
  }

  get kvCacheUsage(): number {
    return this.load.kvCacheUsage;
  }

  recordSuccess(promptTokens: number, generationTokens: number, finishReasons: readonly FinishReason[]) {
    this.promptTokens += promptTokens;
    this.generationTokens += generationTokens;
    for (const reason of finishReasons) {
      this.successByFinishReason.set(reason, (this.successByFinishReason.get(reason) ?? 0) + 1);
    }
  }

  /**
   * vLLM sets the gauge of the current label set to the time, and keeps the label sets of earlier states with the
   * time they were last current: a reader takes the sample with the latest value. Both labels list every adapter
   * with a request in flight (vLLM keys both by the adapters it tracks, running or waiting).
   */
  private recordLoraInfo() {
    const adapters = this.load.lorasInFlight.join(',');
    const labels =
      `max_lora="${this.maxLoras}",running_lora_adapters="${escapeLabel(adapters)}",` +
      `waiting_lora_adapters="${escapeLabel(adapters)}"`;
    // A label set keeps its place (prometheus_client lists them in the order they were first seen).
    this.loraInfo.set(labels, Date.now() / 1000);
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
    family('vllm:kv_cache_usage_perc', 'gauge', 'KV-cache usage. 1 means 100 percent usage.');
    lines.push(`vllm:kv_cache_usage_perc{${labels}} ${formatValue(this.kvCacheUsage)}`);
    family('vllm:prompt_tokens_total', 'counter', 'Number of prefill tokens processed.');
    lines.push(`vllm:prompt_tokens_total{${labels}} ${formatValue(this.promptTokens)}`);
    family('vllm:generation_tokens_total', 'counter', 'Number of generation tokens processed.');
    lines.push(`vllm:generation_tokens_total{${labels}} ${formatValue(this.generationTokens)}`);
    family('vllm:request_success_total', 'counter', 'Count of successfully processed requests.');
    for (const reason of FINISHED_REASONS) {
      const count = this.successByFinishReason.get(reason as FinishReason) ?? 0;
      lines.push(
        `vllm:request_success_total{engine="0",finished_reason="${reason}",model_name="${escapeLabel(modelName)}"} ` +
          formatValue(count),
      );
    }
    if (this.maxLoras !== undefined) {
      // As in vLLM, the family is there once LoRA is enabled; its first sample comes with the first request.
      family('vllm:lora_requests_info', 'gauge', 'Running stats on lora requests.');
      for (const [set, at] of this.loraInfo) lines.push(`vllm:lora_requests_info{${set}} ${formatValue(at)}`);
    }
    return `${lines.join('\n')}\n`;
  }
}

/** prometheus_client's float formatting (which vLLM uses): `1.0`, `0.25`, and `1.7e+09` for large values. */
function formatValue(value: number): string {
  const text = Number.isInteger(value) ? value.toFixed(1) : String(value);
  const dot = text.indexOf('.');
  if (value > 0 && dot > 6) {
    const mantissa = `${text[0]}.${text.slice(1, dot)}${text.slice(dot + 1)}`.replace(/[0.]+$/, '');
    return `${mantissa}e+0${dot - 1}`;
  }
  return text;
}

function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}
