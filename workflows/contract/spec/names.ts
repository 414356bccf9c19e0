// Kubernetes name rules the CLI's argument parser shares with the schema. Zod-free on purpose: the parser imports
// this file directly, so that `ferry --help` and `--version` load no schema (docs/performance.md#cli-start).

/** A DNS-1123 label: a namespace, a model name, a cluster name (at most 63 characters, checked apart). */
export const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/u;
