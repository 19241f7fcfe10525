import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';

const ROOT = path.resolve(import.meta.dirname, '..');
const run = promisify(execFile);

const PackageSchema = z.object({
  license: z.string(),
  repository: z.object({ type: z.literal('git'), url: z.string(), directory: z.string() }),
  homepage: z.string().url(),
});

// The published pieces a user of the project or of the client package reads first.
describe('licence, changelog and the client package', () => {
  it('licenses the project under MIT at the root and in the client package', async () => {
    for (const file of ['LICENSE', 'contract/LICENSE']) {
      const text = await readFile(path.join(ROOT, file), 'utf8');
      expect(text, file).toMatch(/^MIT License\n\nCopyright \(c\) 2026 the task service authors\n/);
      expect(text, file).toContain('THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND');
    }
  });

  it('describes the client package: licence, repository, homepage, and a README in its tarball', async () => {
    const manifest = PackageSchema.parse(JSON.parse(await readFile(path.join(ROOT, 'contract/package.json'), 'utf8')));
    expect(manifest.license).toBe('MIT');
    expect(manifest.repository.directory).toBe('contract');
    const { stdout } = await run(
      'npm',
      ['pack', '--dry-run', '--json', '--ignore-scripts', '--workspace', 'contract'],
      { cwd: ROOT },
    );
    const [packed] = z
      .array(z.object({ files: z.array(z.object({ path: z.string() })) }))
      .parse(JSON.parse(stdout.slice(stdout.indexOf('['))));
    const files = packed?.files.map((file) => file.path) ?? [];
    expect(files).toEqual(expect.arrayContaining(['README.md', 'LICENSE', 'package.json']));
    const readme = await readFile(path.join(ROOT, 'contract/README.md'), 'utf8');
    for (const section of ['## Install', '## Create a client', '## Errors', '## Pagination', '## Events'])
      expect(readme).toContain(section);
  });

  it('keeps a changelog in the Keep a Changelog format', async () => {
    const changelog = await readFile(path.join(ROOT, 'CHANGELOG.md'), 'utf8');
    expect(changelog).toMatch(/^# Changelog\n/);
    expect(changelog).toContain('https://keepachangelog.com/en/1.1.0/');
    expect(changelog).toMatch(/^## \[Unreleased\]$/m);
    expect(changelog).toMatch(/^## \[0\.1\.0\] - \d{4}-\d\d-\d\d$/m);
    const version = z
      .object({ version: z.string() })
      .parse(JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8'))).version;
    expect(changelog).toContain(`## [${version}]`);
  });
});
