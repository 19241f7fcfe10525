// The targets (docs/benchmarks.md): each workload's req/s as a share of its bare twin's (the stack
// baseline doing the same work; argon2 verifications for login) with no error, and the memory of
// the Node.js processes of `npm start`.
export const TARGETS = {
  create: 0.5,
  patch: 0.5,
  read: 0.8,
  list: 0.7,
  login: 0.8,
  /** Peak resident memory of the Node.js processes of `npm start` (npm's included) under load, in MiB: at most this. */
  rssMiB: 200,
} as const;
