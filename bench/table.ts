// The result table: one row per workload and baseline, printed as aligned text.

export interface Row {
  name: string;
  /** Service processes serving requests ("" for baselines). */
  workers: string;
  requestsPerSecond: number;
  p50Ms: number | null;
  p99Ms: number | null;
  errors: number | null;
  peakRssMiB: number | null;
  /** req/s over the runtime baseline's, the stack baseline's, and (login) argon2 verifications per second. */
  vsRuntime: number | null;
  vsStack: number | null;
  vsArgon2: number | null;
  note: string;
}

const COLUMNS: { title: string; cell: (row: Row) => string; left?: boolean }[] = [
  { title: 'workload', cell: (r) => r.name, left: true },
  { title: 'workers', cell: (r) => r.workers },
  { title: 'req/s', cell: (r) => r.requestsPerSecond.toFixed(r.requestsPerSecond < 100 ? 1 : 0) },
  { title: 'p50 ms', cell: (r) => fixed(r.p50Ms, 1) },
  { title: 'p99 ms', cell: (r) => fixed(r.p99Ms, 1) },
  { title: 'errors', cell: (r) => (r.errors === null ? '' : String(r.errors)) },
  { title: 'RSS MiB', cell: (r) => fixed(r.peakRssMiB, 0) },
  { title: 'runtime', cell: (r) => percent(r.vsRuntime) },
  { title: 'stack', cell: (r) => percent(r.vsStack) },
  { title: 'argon2', cell: (r) => percent(r.vsArgon2) },
  { title: 'note', cell: (r) => r.note, left: true },
];

const fixed = (value: number | null, digits: number) => (value === null ? '' : value.toFixed(digits));
const percent = (ratio: number | null) => (ratio === null ? '' : `${(ratio * 100).toFixed(ratio < 0.1 ? 1 : 0)}%`);

export function formatTable(rows: Row[]): string {
  const cells = [COLUMNS.map((c) => c.title), ...rows.map((row) => COLUMNS.map((c) => c.cell(row)))];
  const widths = COLUMNS.map((_, i) => Math.max(...cells.map((line) => (line[i] ?? '').length)));
  return cells
    .map((line) =>
      COLUMNS.map((column, i) => {
        const text = line[i] ?? '';
        const width = widths[i] ?? 0;
        return column.left ? text.padEnd(width) : text.padStart(width);
      })
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}
