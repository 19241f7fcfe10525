// What the main process and its HTTP workers tell each other while starting (cluster IPC).
import { z } from 'zod';

/** Set in the environment of the HTTP workers the main process forks. */
export const HTTP_WORKER_ENV = 'TASK_SERVICE_HTTP_WORKER';

/** A worker has loaded its code and waits for the database, which the main process starts meanwhile. */
export const AwaitingDatabaseSchema = z.object({ awaitingDatabase: z.literal(true) });
/** The main process's answer once the database is migrated: where it is (the embedded one's socket and password). */
export const DatabaseReadySchema = z.object({ databaseUrl: z.string() });
/** A worker cannot start for a reason the operator must fix: the main process says it, once for all. */
export const StartupFailureSchema = z.object({ startupFailure: z.string() });

export type WorkerMessage = z.infer<typeof AwaitingDatabaseSchema> | z.infer<typeof StartupFailureSchema>;
export type MainProcessMessage = z.infer<typeof DatabaseReadySchema>;
