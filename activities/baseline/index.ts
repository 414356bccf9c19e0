// Ferry's load prober: the highest concurrency at which an engine still meets a latency goal (vLLM's
// `bench serve --goodput` method), as a library the baseline activity drives.
export { probe, type LatencyGoal, type ProbeResult, type Workload } from './probe.js';
export type { ProbeTarget } from './request.js';
export { findMaxConcurrency, plannedLoad, type SearchResult } from './search.js';
export { vocabularyIds } from './vocabulary.js';
