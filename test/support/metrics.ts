// Reading /metrics answers (Prometheus text format) in tests.

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses Prometheus text format samples (comments skipped). */
export function samplesOf(text: string): Sample[] {
  return text
    .split('\n')
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
      if (!match?.[1] || !match[3]) throw new Error(`not a sample: ${line}`);
      const labels = Object.fromEntries(
        [...(match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1] ?? '', m[2] ?? '']),
      );
      return { name: match[1], labels, value: Number(match[3]) };
    });
}

/** The value of one sample, 0 when the series does not exist yet. */
export function valueOf(samples: Sample[], name: string, labels: Record<string, string>): number {
  const sample = samples.find(
    (s) =>
      s.name === name &&
      Object.entries(labels).every(([key, value]) => s.labels[key] === value) &&
      Object.keys(s.labels).length === Object.keys(labels).length,
  );
  return sample?.value ?? 0;
}
