/**
 * A failure the operator can fix (a bad setting, a port in use, a data directory in use): its
 * message is one line naming the cause and the fix, printed without a stack trace.
 */
export class OperatorError extends Error {}
