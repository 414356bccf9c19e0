// The stand-in's capacity model (README.md, "Capacity model"): at most `maxNumSeqs` sequences run at once, the rest
// wait in FIFO order, and a decode step slows as the batch grows, so a load test sees a capacity it can find.
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';

export interface CapacityOptions {
  /** vLLM's `--max-num-seqs`: sequences scheduled at once. */
  readonly maxNumSeqs: number;
  /** Decode step time with one sequence running. */
  readonly tokenDelayMs: number;
  /** What each further running sequence adds to a decode step. */
  readonly batchStepMs: number;
  /** Prefill time per prompt token, spent before the first decode step. */
  readonly prefillMsPerToken: number;
  /** The KV cache's size in tokens, for `vllm:kv_cache_usage_perc`; nothing is ever refused or preempted for it. */
  readonly kvCacheTokens: number;
}

interface Waiter {
  admit(): void;
}

export class Scheduler {
  private runningCount = 0;
  private readonly queue: Waiter[] = [];
  /** Tokens the running sequences hold in the KV cache: their prompts and what they have generated so far. */
  private kvTokens = 0;
  /** Requests in flight (queued or running) per LoRA adapter, in the order the adapters first arrived. */
  private readonly loraRequests = new Map<string, number>();
  private readonly listeners: (() => void)[] = [];

  constructor(private readonly options: CapacityOptions) {}

  /** The KV cache's use, 0 to 1: vLLM's `kv_cache_usage_perc`. */
  get kvCacheUsage(): number {
    return Math.min(1, this.kvTokens / this.options.kvCacheTokens);
  }

  /** The adapters with requests in flight, for vLLM's `lora_requests_info`. */
  get lorasInFlight(): readonly string[] {
    return [...this.loraRequests.keys()];
  }

  /** `listener` runs whenever a request arrives, is scheduled, or ends. */
  onChange(listener: () => void) {
    this.listeners.push(listener);
  }

  private changed() {
    for (const listener of this.listeners) listener();
  }

  /** Sequences holding a slot, prefilling or decoding: vLLM's `num_requests_running`. */
  get running(): number {
    return this.runningCount;
  }

  /** Sequences queued for a slot: vLLM's `num_requests_waiting`. */
  get waiting(): number {
    return this.queue.length;
  }

  /**
   * Runs one sequence: waits for a slot, prefills `promptTokens`, then takes `steps` decode steps, calling `onToken`
   * with the step's index as each one's tokens are due. Rejects with the signal's reason if it aborts (the client
   * left), whether queued or running; the slot is given back either way.
   */
  async generate(
    promptTokens: number,
    steps: number,
    signal: AbortSignal,
    onToken: (step: number) => void,
    lora?: string,
  ) {
    signal.throwIfAborted();
    if (lora !== undefined) this.loraRequests.set(lora, (this.loraRequests.get(lora) ?? 0) + 1);
    let admitted = false;
    let held = 0;
    try {
      this.changed();
      await this.admit(signal);
      admitted = true;
      held = promptTokens;
      this.kvTokens += held;
      this.changed();
      // Steps are due at absolute times, each step(r) after the previous one was due, so a timer firing late (a
      // loaded event loop) shortens the next wait instead of stretching the whole answer.
      let due = performance.now() + this.options.prefillMsPerToken * promptTokens;
      for (let step = 0; step < steps; step += 1) {
        due += this.stepMs();
        await pauseUntil(due, signal);
        held += 1;
        this.kvTokens += 1;
        onToken(step);
      }
    } finally {
      // A request that left the queue never held a slot (the queue has already forgotten it).
      if (admitted) this.release();
      this.kvTokens -= held;
      if (lora !== undefined) {
        const left = (this.loraRequests.get(lora) ?? 1) - 1;
        if (left > 0) this.loraRequests.set(lora, left);
        else this.loraRequests.delete(lora);
      }
      this.changed();
    }
  }

  /** step(r) = tokenDelayMs + batchStepMs × (r − 1), read when the step starts. */
  private stepMs(): number {
    return this.options.tokenDelayMs + this.options.batchStepMs * (this.runningCount - 1);
  }

  private admit(signal: AbortSignal): Promise<void> {
    // Anyone queued means every slot is taken, so a free slot can go straight to the newcomer without jumping the line.
    if (this.runningCount < this.options.maxNumSeqs) {
      this.runningCount += 1;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const leave = () => {
        // A client that gave up while queued must not keep its place, or the slot it would get would be wasted.
        this.queue.splice(this.queue.indexOf(waiter), 1);
        reject(signal.reason as Error);
      };
      const waiter: Waiter = {
        admit: () => {
          signal.removeEventListener('abort', leave);
          resolve();
        },
      };
      signal.addEventListener('abort', leave, { once: true });
      this.queue.push(waiter);
    });
  }

  /** Hands the freed slot to the longest waiter, if any; otherwise the batch shrinks. */
  private release() {
    const next = this.queue.shift();
    if (next) next.admit();
    else this.runningCount -= 1;
  }
}

async function pauseUntil(due: number, signal: AbortSignal) {
  const wait = due - performance.now();
  // No timer when nothing is to wait for, so a stand-in without delays answers in one turn of the event loop.
  if (wait > 0) await sleep(wait, undefined, { signal });
}
