// The result table: one row per workload and baseline, printed as aligned text, then the targets.

export interface Row {
  name: string;
  /** Service processes serving requests ("" for baselines). */
  workers: string;
  requestsPerSecond: number;
  p50Ms: number | null;
  p99Ms: number | null;
  errors: number | null;
  peakRssMiB: number | null;
  /** req/s over the runtime baseline's. */
  vsRuntime: number | null;
  /** req/s over the bare baseline's doing the same work (login: argon2 verifications per second). */
  vsBare: number | null;
  /** The least share of its bare baseline the row should reach. */
  target: number | null;
  /** Whether the row is the service's (its memory counts towards the memory target). */
  service: boolean;
  note: string;
}

const percent = (ratio: number | null) => (ratio === null ? '' : `${(ratio * 100).toFixed(ratio < 0.1 ? 1 : 0)}%`);
const fixed = (value: number | null, digits: number) => (value === null ? '' : value.toFixed(digits));
const verdict = (met: boolean) => (met ? 'PASS' : 'MISS');
const targetCell = (r: Row) =>
  r.target === null || r.vsBare === null ? '' : `≥ ${percent(r.target)} ${verdict(r.vsBare >= r.target)}`;

interface Column {
  title: string;
  cell: (row: Row) => string;
  left?: boolean;
}

const COLUMNS: Column[] = [
  { title: 'workload', cell: (r) => r.name, left: true },
  { title: 'workers', cell: (r) => r.workers },
  { title: 'req/s', cell: (r) => r.requestsPerSecond.toFixed(r.requestsPerSecond < 100 ? 1 : 0) },
  { title: 'p50 ms', cell: (r) => fixed(r.p50Ms, 1) },
  { title: 'p99 ms', cell: (r) => fixed(r.p99Ms, 1) },
  { title: 'errors', cell: (r) => (r.errors === null ? '' : String(r.errors)) },
  { title: 'RSS MiB', cell: (r) => fixed(r.peakRssMiB, 0) },
  { title: 'runtime', cell: (r) => percent(r.vsRuntime) },
  { title: 'vs bare', cell: (r) => percent(r.vsBare) },
  { title: 'target', cell: targetCell, left: true },
  { title: 'note', cell: (r) => r.note, left: true },
];

function aligned(columns: Column[], rows: Row[]): string {
  const cells = [columns.map((c) => c.title), ...rows.map((row) => columns.map((c) => c.cell(row)))];
  const widths = columns.map((_, i) => Math.max(...cells.map((line) => (line[i] ?? '').length)));
  return cells
    .map((line) =>
      columns
        .map((column, i) => {
          const text = line[i] ?? '';
          const width = widths[i] ?? 0;
          return column.left ? text.padEnd(width) : text.padStart(width);
        })
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

export const formatTable = (rows: Row[]): string => aligned(COLUMNS, rows);

/** Each target met or missed, and the service's peak memory over all its rows against `maxRssMiB`. */
/**
 * The targets are the default set-up's (`workers`, as its rows are labelled): the full run's row with
 * the other worker count is shown in the table, not judged here.
 */
export function formatTargets(rows: Row[], maxRssMiB: number, workers: string): string {
  const judged = rows.filter((r) => !r.service || r.workers === workers);
  const targeted = judged.filter((r) => r.target !== null && r.vsBare !== null);
  const met = targeted.filter((r) => r.vsBare !== null && r.target !== null && r.vsBare >= r.target).length;
  const peaks = judged.filter((r) => r.service && r.peakRssMiB !== null).map((r) => r.peakRssMiB ?? 0);
  const peak = peaks.length ? Math.max(...peaks) : null;
  const lines = targeted.map((r) => [targetCell(r), percent(r.vsBare), r.name]);
  if (peak !== null)
    lines.push([
      `≤ ${maxRssMiB} MiB ${verdict(peak <= maxRssMiB)}`,
      `${peak.toFixed(0)} MiB`,
      "peak RSS of the service's process tree (the most of its rows)",
    ]);
  const width = (i: number) => Math.max(...lines.map((line) => (line[i] ?? '').length));
  const text = lines.map(
    ([target = '', figure = '', what = '']) => `  ${target.padEnd(width(0))}  ${figure.padStart(width(1))}  ${what}`,
  );
  const total = targeted.length + (peak === null ? 0 : 1);
  const passed = met + (peak !== null && peak <= maxRssMiB ? 1 : 0);
  return [
    `Targets: ${passed} of ${total} met (req/s as a share of the bare baseline's doing the same work; login: of argon2id verifications)`,
    ...text,
  ].join('\n');
}
