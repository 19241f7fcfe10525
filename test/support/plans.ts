// Query plans as EXPLAIN (ANALYZE, FORMAT JSON) gives them, read into typed nodes for the plan tests.
import type { Compilable } from 'kysely';
import { z } from 'zod';
import { statementOf } from '../../server/db/query.js';
import type { SqlSession } from '../../server/db/sql.js';

export interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Scan Direction'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  Plans?: PlanNode[];
}

const PlanNodeSchema: z.ZodType<PlanNode> = z.lazy(() =>
  z.object({
    'Node Type': z.string(),
    'Relation Name': z.string().optional(),
    'Index Name': z.string().optional(),
    'Scan Direction': z.string().optional(),
    'Actual Rows': z.number(),
    'Actual Loops': z.number(),
    'Rows Removed by Filter': z.number().optional(),
    Plans: z.array(PlanNodeSchema).optional(),
  }),
);

const ExplainSchema = z.tuple([z.object({ 'QUERY PLAN': z.tuple([z.object({ Plan: PlanNodeSchema })]) })]);

const nodesOf = (node: PlanNode): PlanNode[] => [node, ...(node.Plans ?? []).flatMap(nodesOf)];

/** Every node of the plan in the rows of one EXPLAIN (FORMAT JSON), the top one first. */
export const planNodes = (rows: unknown): PlanNode[] => nodesOf(ExplainSchema.parse(rows)[0]['QUERY PLAN'][0].Plan);

/** The plan of a built query as it ran (EXPLAIN ANALYZE), on `db`. */
export async function explainPlan(db: SqlSession, built: Compilable<unknown>): Promise<PlanNode[]> {
  const { text, values } = statementOf(built);
  return planNodes(await db.rows(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`, values));
}

/** Rows the scans of `table` read, those filtered out included. */
export const rowsRead = (nodes: PlanNode[], table: string): number =>
  nodes
    .filter((node) => node['Relation Name'] === table)
    .reduce(
      (sum, scan) => sum + (scan['Actual Rows'] + (scan['Rows Removed by Filter'] ?? 0)) * scan['Actual Loops'],
      0,
    );
