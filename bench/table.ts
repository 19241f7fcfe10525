// The result table: one row per workload and baseline, printed as aligned text, then the targets.
// A row with a target passes when it reaches its share of its bare twin with no error; the memory
// row when the peak is at most its ceiling.

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
  /** The memory row: the most MiB its peak may reach (its peak is `peakRssMiB`). */
  maxRssMiB?: number;
  /** Whether the row is the service's (its memory counts towards the memory target, but a login storm's). */
  service: boolean;
  /** A login storm: argon2id holds 19 MiB per hash in flight, a cost of the password policy, shown beside the target. */
  login?: boolean;
  note: string;
}

const percent = (ratio: number | null) => (ratio === null ? '' : `${(ratio * 100).toFixed(ratio < 0.1 ? 1 : 0)}%`);
const fixed = (value: number | null, digits: number) => (value === null ? '' : value.toFixed(digits));
const verdict = (met: boolean) => (met ? 'PASS' : 'MISS');
/** Whether a row with a target met it: its share of its twin, and no error; undefined for a row without one. */
export function passed(r: Row): boolean | undefined {
  if (r.maxRssMiB !== undefined) return r.peakRssMiB !== null && r.peakRssMiB <= r.maxRssMiB;
  if (r.target === null || r.vsBare === null) return undefined;
  return r.vsBare >= r.target && r.errors === 0;
}

function targetCell(r: Row): string {
  const met = passed(r);
  if (met === undefined) return '';
  const goal = r.maxRssMiB !== undefined ? `≤ ${r.maxRssMiB} MiB` : `≥ ${percent(r.target)}, 0 errors`;
  return `${goal} ${verdict(met)}`;
}

interface Column {
  title: string;
  cell: (row: Row) => string;
  left?: boolean;
}

const COLUMNS: Column[] = [
  { title: 'workload', cell: (r) => r.name, left: true },
  { title: 'workers', cell: (r) => r.workers },
  {
    title: 'req/s',
    cell: (r) => (r.maxRssMiB !== undefined ? '' : r.requestsPerSecond.toFixed(r.requestsPerSecond < 100 ? 1 : 0)),
  },
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

/**
 * The memory row: the peak over the service's API rows of the main run (`workers`, as its rows are
 * labelled) of its Node.js processes' resident memory, npm's process included. A login storm's
 * peak is shown in its note, not judged: each hash in flight holds argon2id's 19 MiB (the OWASP
 * parameters the configuration enforces), memory the password policy asks for.
 */
export function memoryRow(rows: Row[], workers: string, maxRssMiB: number, npmMiB: number): Row {
  const served = rows.filter((r) => r.service && r.workers === workers && r.peakRssMiB !== null);
  const peaks = served.filter((r) => !r.login);
  const loginPeak = Math.max(0, ...served.filter((r) => r.login).map((r) => r.peakRssMiB ?? 0));
  return {
    name: 'peak RSS, Node.js processes of `npm start`',
    workers,
    requestsPerSecond: 0,
    p50Ms: null,
    p99Ms: null,
    errors: null,
    peakRssMiB: Math.max(0, ...peaks.map((r) => r.peakRssMiB ?? 0)),
    vsRuntime: null,
    vsBare: null,
    target: null,
    maxRssMiB,
    service: false,
    note: [
      `the most of the API rows; npm's own process ${npmMiB.toFixed(0)} MiB of it at the end`,
      loginPeak > 0 ? `the login storm: ${loginPeak.toFixed(0)} MiB (argon2id's 19 MiB per hash in flight)` : '',
    ]
      .filter(Boolean)
      .join('; '),
  };
}

/**
 * Each target met or missed, and whether all were. The targets are the default set-up's (`workers`,
 * as its rows are labelled): the full run's row with the other worker count is shown in the table,
 * not judged here. Every row, baselines too, must answer without error.
 */
export function formatTargets(rows: Row[], workers: string): { text: string; allPassed: boolean } {
  const judged = rows.filter((r) => !r.service || r.workers === workers);
  const targeted = judged.filter((r) => passed(r) !== undefined);
  const lines = targeted.map((r) => [
    targetCell(r),
    r.maxRssMiB !== undefined ? `${fixed(r.peakRssMiB, 0)} MiB` : `${percent(r.vsBare)}, ${r.errors ?? 0} errors`,
    r.name,
  ]);
  const erring = rows.filter((r) => r.errors !== null && r.errors > 0);
  lines.push([
    `0 errors ${verdict(erring.length === 0)}`,
    `${erring.length} rows`,
    `every row${erring.length ? `; with errors: ${erring.map((r) => r.name).join(', ')}` : ''}`,
  ]);
  const width = (i: number) => Math.max(...lines.map((line) => (line[i] ?? '').length));
  const text = lines.map(
    ([target = '', figure = '', what = '']) => `  ${target.padEnd(width(0))}  ${figure.padStart(width(1))}  ${what}`,
  );
  const met = targeted.filter((r) => passed(r)).length + (erring.length === 0 ? 1 : 0);
  const total = targeted.length + 1;
  return {
    text: [
      `Targets: ${met} of ${total} met (req/s as a share of the bare twin's doing the same work, with no error; login: of argon2id verifications)`,
      ...text,
    ].join('\n'),
    allPassed: met === total,
  };
}
