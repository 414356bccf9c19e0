// The rules only Ferry's parser checks: the JSON Schema (schema/servedmodel.schema.json) says every other rule, from
// the same regular expressions and bounds. Each of these compares a field with another, reads a list in order or
// as a whole, or reads the value a string stands for; the generator lists them in the schema's description and in
// docs/spec.md, and the parser tags each issue it raises for one (`params.parserOnly`), which the differential test
// (test/unit/schema-differential.test.ts) reads. Pure.

/** Each rule by its name, in the words docs/spec.md shows. */
export const PARSER_ONLY_RULES = {
  'document-size': 'a document is at most 256 KiB of strings, 1000 values and 64 levels deep',
  'quantity-range': 'a quantity is at most 2^53 - 1 in its unit, and not so small that it rounds to 0 (like 1e-400)',
  'duration-range': 'a duration is at most 3650d, and not so short that it rounds to 0 milliseconds (like 0.1ms)',
  'shm-below-memory': 'resources.shmSize is smaller than resources.memory',
  'own-volume': "no source (the model's or an adapter's) is the model's own volume, <metadata.name>-weights",
  'adapter-not-base': 'no adapter has the name the base model is served as',
  'listed-once':
    'each variable of engine.env and puller.env, each adapter, and each cluster of placement.clusters is listed once',
  'scaling-bounds':
    "scaling.minReplicas is at most scaling.maxReplicas, replicas at most scaling.maxReplicas, and each schedule window's minReplicas between the two",
  'scaling-target': 'scaling without targetConcurrency needs slo (the target is a share of the measured capacity)',
  'real-time': 'expiresAt names a day its month has (no February 30)',
  cron: "each schedule window's cron is one cron can run (fields in range, like minute 0-59)",
  'time-zone': "each schedule window's timeZone is a zone the IANA database has",
  'front-hold': 'front.holdFor is at most 1h',
  'idle-to-zero': 'scaling.idleToZeroAfter is at least 1m, and needs front',
  rollout:
    'rollout: Recreate has no steps; BlueGreen and Canary need front, and not inferencePool yet; Canary has at least one step, each above 0 and none below the one before; BlueGreen steps are at 0; a pause is at most 7d',
  'args-in-order': 'each item of engine.args that is not a flag is a value its flag takes',
  'shared-cache':
    'storage.cache shared is not yet used with LoRA adapters, storage.accessMode ReadWriteOncePod or a BlueGreen or Canary rollout',
} as const;

export type ParserOnlyRule = keyof typeof PARSER_ONLY_RULES;

/** The `params` of a zod issue raised for a parser-only rule. */
export const parserOnly = (rule: ParserOnlyRule) => ({ parserOnly: rule });
