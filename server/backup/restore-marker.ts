import { sql } from 'kysely';
import { rawQuery } from '../db/query.js';
import { OperatorError } from '../operator-error.js';
import type { SqlSession } from '../db/sql.js';

/**
 * A restore marks its target before writing anything to it and unmarks it only once everything is
 * in place: a restore cut short (a signal, a crash) leaves the mark, which the next restore of the
 * same archive finishes from, and which the service refuses to start on.
 */
export const RESTORE_MARKER_TABLE = '_restore_in_progress';

export class UnfinishedRestoreError extends OperatorError {
  constructor() {
    super(
      'The database holds an unfinished restore: run `npm run restore -- FILE` again with the same archive to finish it',
    );
  }
}

export async function hasUnfinishedRestore(db: SqlSession): Promise<boolean> {
  const row = await db.first(
    rawQuery(sql<{ marked: boolean }>`SELECT to_regclass(${`"${RESTORE_MARKER_TABLE}"`}) IS NOT NULL AS marked`),
  );
  return row?.marked === true;
}

/** Refuses a database that a restore has not finished (its rows are incomplete, its event log not yet readable). */
export async function assertNoUnfinishedRestore(db: SqlSession): Promise<void> {
  if (await hasUnfinishedRestore(db)) throw new UnfinishedRestoreError();
}
