// The targets (docs/benchmarks.md): each workload's req/s as a share of its bare baseline's (the stack
// baseline doing the same work; argon2 verifications for login), and the service's memory.
export const TARGETS = {
  create: 0.5,
  patch: 0.5,
  read: 0.8,
  list: 0.7,
  login: 0.8,
  /** Peak resident memory of the service's process tree under load, in MiB: at most this. */
  rssMiB: 300,
} as const;
