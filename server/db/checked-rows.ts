import type pg from 'pg';
import { z } from 'zod';

/** Issues shown in the error; the rest are counted. */
const SHOWN_ISSUES = 3;

/**
 * The rows of a statement that the builder cannot type (the catalog, system functions, tables that
 * are no model), checked against `row`: pg hands rows over as `any`, and a row of another shape
 * would go on unnoticed as the one expected. Rows of the service's tables come from a built query
 * (query.ts) instead.
 */
export async function checkedRows<Row>(
  client: pg.ClientBase,
  row: z.ZodType<Row, z.ZodTypeDef, unknown>,
  text: string,
  values?: unknown[],
): Promise<Row[]> {
  const { rows }: { rows: unknown[] } = await client.query(text, values);
  const checked = z.array(row).safeParse(rows);
  if (checked.success) return checked.data;
  const issues = checked.error.issues.map((issue) => {
    const [index, ...field] = issue.path;
    return `row ${index ?? '?'}${field.length > 0 ? ` ${field.join('.')}` : ''}: ${issue.message}`;
  });
  const more = issues.length > SHOWN_ISSUES ? `; ${issues.length - SHOWN_ISSUES} more` : '';
  throw new Error(
    `Unexpected rows from \`${text.replace(/\s+/g, ' ').trim()}\`: ${issues.slice(0, SHOWN_ISSUES).join('; ')}${more}`,
  );
}
