// Every sample in README.md and docs/ is run, so the documentation stays true:
// - `sh` blocks run in bash against a started service process (its URL in place of
//   http://localhost:3000), after the quick start, which must work the second time too;
// - `sh norun` blocks (a production set-up, or the set-up itself) are checked by `bash -n`;
// - the `sh project` block of docs/client.md makes a TypeScript project exactly as it says, with the
//   client packed from this checkout, and every `ts` block is compiled there with its tsc and run;
// - every relative link and anchor resolves;
// - every variable server/config.ts reads has its row in docs/configuration.md.
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase, type TestDatabase } from './support/databases.js';
import { killIfRunning, startServiceProcess, type ServiceProcess } from './support/processes.js';
import { packedClient } from './support/packed-client.js';
import { bash, CURL_STATUS_PRELUDE } from './support/shell.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const SAMPLE_URL = 'http://localhost:3000';

interface Block {
  file: string;
  line: number;
  lang: string;
  /** The words after the language: `norun`, `project`, `expect=400`. */
  flags: string[];
  source: string;
}

async function markdownFiles(): Promise<string[]> {
  const docs = (await readdir(path.join(ROOT, 'docs'))).filter((name) => name.endsWith('.md'));
  return ['README.md', ...docs.map((name) => `docs/${name}`)];
}

/** The fenced code blocks of a Markdown file, with their info strings. */
function blocksOf(file: string, text: string): Block[] {
  const blocks: Block[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S+)(.*)$/.exec(lines[i] ?? '');
    if (!open) continue;
    const start = i;
    const body: string[] = [];
    while (++i < lines.length && lines[i] !== '```') body.push(lines[i] ?? '');
    const [lang = '', flags = ''] = [open[1], open[2]];
    blocks.push({
      file,
      line: start + 1,
      lang,
      flags: flags.trim().split(/\s+/).filter(Boolean),
      source: body.join('\n'),
    });
  }
  return blocks;
}

let blocks: Block[] = [];
const shellBlocks = (flag?: string) =>
  blocks.filter(
    (b) =>
      b.lang === 'sh' &&
      (flag === undefined ? b.flags.length === 0 || b.flags[0]?.startsWith('expect=') : b.flags.includes(flag)),
  );
const where = (block: Block) => `${block.file}:${block.line}`;

const PRELUDE = CURL_STATUS_PRELUDE;

beforeAll(async () => {
  const files = await markdownFiles();
  blocks = (
    await Promise.all(files.map(async (file) => blocksOf(file, await readFile(path.join(ROOT, file), 'utf8'))))
  ).flat();
});

describe('links in README.md and docs/', () => {
  /** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
  const slug = (heading: string) =>
    heading
      .trim()
      .toLowerCase()
      .replace(/`/g, '')
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');

  async function anchorsOf(file: string): Promise<Set<string>> {
    const text = await readFile(file, 'utf8');
    const withoutCode = text.replace(/^```[\s\S]*?^```$/gm, '');
    const counts = new Map<string, number>();
    const anchors = new Set<string>();
    for (const match of withoutCode.matchAll(/^#{1,6} (.+)$/gm)) {
      const base = slug(match[1] ?? '');
      const seen = counts.get(base) ?? 0;
      counts.set(base, seen + 1);
      anchors.add(seen === 0 ? base : `${base}-${seen}`);
    }
    return anchors;
  }

  it('every relative link names a file or folder of the repository, and every anchor a heading there', async () => {
    const broken: string[] = [];
    let checked = 0;
    for (const file of await markdownFiles()) {
      const text = (await readFile(path.join(ROOT, file), 'utf8')).replace(/^```[\s\S]*?^```$/gm, '');
      for (const match of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = match[1] ?? '';
        if (/^[a-z]+:/i.test(target)) continue; // https:, mailto:
        checked++;
        const [pathPart = '', anchor] = target.split('#');
        const resolved =
          pathPart === '' ? path.join(ROOT, file) : path.resolve(path.dirname(path.join(ROOT, file)), pathPart);
        if (!resolved.startsWith(ROOT) || !existsSync(resolved)) {
          broken.push(`${file}: ${target} (no such file)`);
          continue;
        }
        if (anchor !== undefined && !(await anchorsOf(resolved)).has(anchor))
          broken.push(`${file}: ${target} (no heading #${anchor})`);
      }
    }
    expect(broken).toEqual([]);
    expect(checked).toBeGreaterThan(20);
  });

  it('README.md is a front page of at most 300 lines', async () => {
    expect((await readFile(path.join(ROOT, 'README.md'), 'utf8')).split('\n').length).toBeLessThanOrEqual(300);
  });
});

/** The keys of the `z.object({...})` that `EnvSchema` is built on, read from server/config.ts's syntax tree. */
async function envSchemaKeys(): Promise<string[]> {
  const file = path.join(ROOT, 'server/config.ts');
  const source = ts.createSourceFile(file, await readFile(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const keys: string[] = [];
  const visit = (node: ts.Node, inSchema: boolean): void => {
    const isSchema = ts.isVariableDeclaration(node) && ts.isIdentifier(node.name) && node.name.text === 'EnvSchema';
    if (
      inSchema &&
      ts.isCallExpression(node) &&
      ts.isPropertyAccessExpression(node.expression) &&
      node.expression.name.text === 'object'
    ) {
      const [shape] = node.arguments;
      if (shape && ts.isObjectLiteralExpression(shape))
        for (const property of shape.properties)
          if (property.name && (ts.isIdentifier(property.name) || ts.isStringLiteral(property.name)))
            keys.push(property.name.text);
      return;
    }
    ts.forEachChild(node, (child) => visit(child, inSchema || isSchema));
  };
  visit(source, false);
  return keys;
}

describe('docs/configuration.md', () => {
  it('has a table row for every variable of the configuration schema in server/config.ts', async () => {
    const keys = await envSchemaKeys();
    expect(keys).toContain('PORT'); // the schema was found
    expect(keys.length).toBeGreaterThan(50);
    const documented = new Set(
      (await readFile(path.join(ROOT, 'docs/configuration.md'), 'utf8'))
        .split('\n')
        .filter((line) => line.startsWith('| `'))
        .flatMap((line) => [...(line.split(' | ')[0] ?? '').matchAll(/`([A-Z][A-Z0-9_]*)`/g)].map((m) => m[1])),
    );
    expect(keys.filter((key) => !documented.has(key))).toEqual([]);
  });
});

describe('shell samples', () => {
  let database: TestDatabase;
  let service: ServiceProcess | undefined;
  let work: string;
  const local = (source: string) => source.replaceAll(SAMPLE_URL, service?.url ?? '');

  beforeAll(async () => {
    work = await mkdtemp(path.join(tmpdir(), 'task-service-doc-samples-'));
    database = await freshDatabase();
    service = await startServiceProcess({ DATABASE_URL: database.url, DATA_DIR: path.join(work, 'data') });
  }, 120_000);
  afterAll(async () => {
    killIfRunning(service);
    await service?.exited;
    await database?.drop();
    await rm(work, { recursive: true, force: true });
  });

  const quickStart = () => {
    const found = shellBlocks().filter((b) => b.file === 'README.md');
    expect(found.length).toBe(1);
    return found[0] as Block;
  };

  it('are marked: every sh block of the README and docs/ is run, checked, or makes the client project', () => {
    const runnable = shellBlocks();
    expect(runnable.length).toBeGreaterThanOrEqual(4);
    for (const block of blocks.filter((b) => b.lang === 'sh'))
      expect(['norun', 'project', undefined], where(block)).toContain(
        block.flags.find((flag) => !flag.startsWith('expect=')),
      );
    // Shell samples go in sh blocks, so none escapes the test.
    expect(blocks.filter((b) => ['bash', 'shell', 'console', 'zsh'].includes(b.lang)).map(where)).toEqual([]);
  });

  it('the quick start registers, creates and lists; run again, it logs in instead', { timeout: 60_000 }, async () => {
    const script = `${PRELUDE}${local(quickStart().source)}\nprintf 'TOKEN=%s\\n' "$TOKEN"\n`;
    const first = await bash(script, work);
    expect(first.code, first.stderr).toBe(0);
    expect(first.statuses).toEqual([201, 201, 200]);
    expect(first.stdout).toContain('"title":"Write the report"');
    const second = await bash(script, work);
    expect(second.code, second.stderr).toBe(0);
    expect(second.statuses).toEqual([409, 200, 201, 200]);
    expect(second.stdout).toMatch(/TOKEN=eyJ/);
    expect(second.stdout.match(/"title":"Write the report"/g)?.length).toBe(3); // the new task, then both in the list
  });

  it('the quick start stops with a message, never sending "Bearer undefined", when it gets no token', async () => {
    // Nothing listens on port 9 of loopback (discard): both curls fail.
    const failed = await bash(`${PRELUDE}${quickStart().source.replaceAll(SAMPLE_URL, 'http://127.0.0.1:9')}`, work);
    expect(failed.code).not.toBe(0);
    expect(failed.stderr).toContain('no token');
    expect(failed.statuses.filter((status) => status !== 0)).toEqual([]);
  });

  it('every other sh sample runs against the service after the quick start', { timeout: 120_000 }, async () => {
    const session = await bash(`${PRELUDE}${local(quickStart().source)}\nprintf '%s' "$TOKEN"`, work);
    const token = /(eyJ[\w.-]+)$/.exec(session.stdout)?.[1] ?? '';
    expect(token).not.toBe('');
    const others = shellBlocks().filter((block) => block !== quickStart());
    expect(others.length).toBeGreaterThanOrEqual(3);
    for (const block of others) {
      const result = await bash(`${PRELUDE}TOKEN=${token}\n${local(block.source)}\n`, work);
      const label = `${where(block)}\n${result.stdout}\n${result.stderr}`;
      expect(result.code, label).toBe(0);
      expect(result.statuses.length, label).toBeGreaterThan(0);
      expect(
        result.statuses.every((status) => status > 0 && status < 500),
        label,
      ).toBe(true);
      const expected = block.flags.find((flag) => flag.startsWith('expect='))?.slice('expect='.length);
      const last = result.statuses.at(-1) ?? 0;
      if (expected) expect(String(last), label).toBe(expected);
      else expect(last, label).toBeLessThan(400);
    }
  });

  it('the sh norun samples are at least valid shell', async () => {
    for (const block of shellBlocks('norun')) {
      const result = await bash(`bash -n <<'SAMPLE'\n${block.source}\nSAMPLE`, work);
      expect(result.code, `${where(block)}: ${result.stderr}`).toBe(0);
    }
  });

  it(
    'the TypeScript samples compile in a project made as docs/client.md says, and run against the service',
    { timeout: 600_000 },
    async () => {
      const tarball = await packedClient();
      const setUp = shellBlocks('project');
      expect(setUp.map((b) => b.file)).toEqual(['docs/client.md']);
      const [{ source }] = setUp as [Block];
      expect(source).toContain('../task-service/task-service-client-0.1.0.tgz');
      // The client packed from this checkout where the docs name the tarball; npm from its cache when it can.
      const made = await bash(
        `set -euo pipefail\n${source.replaceAll('../task-service/task-service-client-0.1.0.tgz', tarball)}\n`,
        work,
        {
          npm_config_prefer_offline: 'true',
          npm_config_audit: 'false',
          npm_config_fund: 'false',
          npm_config_loglevel: 'error',
        },
        300_000,
      );
      expect(made.code, made.stderr).toBe(0);
      const project = path.join(work, 'my-app');

      const samples = blocks.filter((b) => b.lang === 'ts');
      expect(samples.length).toBeGreaterThanOrEqual(3);
      const names = samples.map((_, index) => `sample-${index}`);
      await Promise.all(
        samples.map((block, index) =>
          writeFile(path.join(project, `${names[index]}.ts`), `// ${where(block)}\n${local(block.source)}\n`),
        ),
      );
      // As the docs say: `npx tsc`, with the tsconfig.json `tsc --init` wrote.
      const compiled = await bash('npx tsc', project, {}, 180_000);
      expect(compiled.code, `${compiled.stdout}\n${compiled.stderr}`).toBe(0);
      for (const [index, block] of samples.entries()) {
        const result = await bash(`node ${names[index]}.js`, project);
        expect(result.code, `${where(block)}\n${result.stdout}\n${result.stderr}`).toBe(0);
      }
      // The complete example got as far as marking its task done, with the version after the upload.
      const complete = samples.findIndex((b) => b.source.includes("'if-match'"));
      const again = await bash(`node ${names[complete]}.js`, project);
      expect(again.code, again.stderr).toBe(0);
      expect(again.stdout).toMatch(/done at \d{4}-\d\d-\d\dT[\d:.]+Z, version 3/);
    },
  );
});
