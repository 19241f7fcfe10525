import type { AppContext } from '../context.js';
import type { Prisma } from '../generated/prisma/client.js';

/** The storage keys of the attachments `where` selects, read before their rows are deleted. */
export async function storageKeysOf(
  db: Prisma.TransactionClient,
  where: Prisma.AttachmentWhereInput,
): Promise<string[]> {
  const rows = await db.attachment.findMany({ where, select: { storageKey: true } });
  return rows.map((row) => row.storageKey);
}

/**
 * Removes bytes whose rows are already gone. Best effort: a failure is logged, and the orphan
 * sweep removes what is left.
 */
export async function discardStoredBytes(ctx: AppContext, keys: string[]): Promise<void> {
  for (const key of keys) {
    await ctx.attachmentStorage.remove(key).catch((error: unknown) => {
      ctx.logger.warn(
        { err: error, storageKey: key },
        'could not remove attachment bytes; the orphan sweep will retry',
      );
    });
  }
}
