import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverReachableTempDir } from './support/databases.js';
import { runCli, startServiceProcess, type ServiceProcess } from './support/processes.js';

// What a process loads to start, held to what it uses: the dependencies of features a process may
// never use (S3, Redis, MCP, the OAuth endpoints, uploads) are loaded at their first use, and a CLI
// loads none of the HTTP service. Each process here records the files it loads through a module
// hook (NODE_OPTIONS=--import): the bundle's files (dist/bundle/), each named by the modules it
// holds, and the packages left out of it.

// Processes run their own embedded PostgreSQL; once per run is enough, whatever the project.
const once = process.env.TEST_DB === 'embedded';

/** Loaded only when used: the service's start must load none of these. */
const LOADED_AT_FIRST_USE: Record<string, RegExp> = {
  'the AWS SDK (S3 storage)': /node_modules\/@aws-sdk\//,
  'ioredis (Redis rate limit store)': /node_modules\/ioredis\//,
  'the MCP server (POST /mcp)':
    /node_modules\/@modelcontextprotocol\/sdk\/dist\/esm\/server\/(index|mcp|streamableHttp)\.js/,
  "the SDK's OAuth handlers": /node_modules\/@modelcontextprotocol\/sdk\/dist\/esm\/server\/auth\/handlers\//,
  'zod 4 (the MCP SDK)': /node_modules\/zod\/v4\//,
  'express-rate-limit (the OAuth handlers)': /node_modules\/express-rate-limit\//,
  'multer (uploads)': /node_modules\/multer\//,
  'file-type (uploads)': /node_modules\/file-type\//,
  'the OpenAPI generator (GET /openapi.json)': /node_modules\/@ts-rest\/open-api\//,
};

/** Never loaded by a CLI. */
const HTTP_SERVICE: Record<string, RegExp> = {
  express: /node_modules\/express\//,
  'the MCP SDK': /node_modules\/@modelcontextprotocol\//,
  'prom-client': /node_modules\/prom-client\//,
};

const matching = (loaded: string[], patterns: Record<string, RegExp>) =>
  Object.entries(patterns)
    .filter(([, pattern]) => loaded.some((url) => pattern.test(url)))
    .map(([name]) => name);

let work: string;
let nodeOptions: string;
beforeAll(async () => {
  work = await mkdtemp(path.join(tmpdir(), 'task-service-imports-'));
  const hooks = path.join(work, 'hooks.mjs');
  // Runs in the loader's thread: appends each module's URL to the file its process was given.
  await writeFile(
    hooks,
    `import { appendFileSync } from 'node:fs';
export async function load(url, context, next) {
  if (process.env.LOADED_MODULES_FILE) appendFileSync(process.env.LOADED_MODULES_FILE, url + '\\n');
  return next(url, context);
}
`,
  );
  const register = path.join(work, 'register.mjs');
  await writeFile(
    register,
    `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(hooks).href)});\n`,
  );
  nodeOptions = `--import=${pathToFileURL(register).href}`;
});
afterAll(() => rm(work, { recursive: true, force: true }));

/**
 * The modules a process loaded, as recorded in `file`: each file loaded outside the bundle, and for
 * each file of the bundle loaded, the modules esbuild put in it (it heads each with its path, as in
 * `// node_modules/express/index.js`), once per load.
 */
async function loadedBy(file: string): Promise<string[]> {
  const urls = (await readFile(file, 'utf8').catch(() => '')).split('\n').filter(Boolean);
  const modules = await Promise.all(
    urls.map(async (url) => {
      if (!url.includes('/dist/bundle/')) return [url];
      const source = await readFile(fileURLToPath(url), 'utf8');
      return [url, ...Array.from(source.matchAll(/^\/\/ (node_modules\/\S+)$/gm), (match) => match[1] ?? '')];
    }),
  );
  return modules.flat();
}

/**
 * Whether the HTTP app is among what was loaded: the service's modules are bundled (dist/bundle/,
 * an entry and the chunks it loads), so it is known by its builder's definition in one of them.
 */
async function loadsHttpApp(loaded: string[]): Promise<boolean> {
  const ours = loaded.filter((url) => url.includes('/dist/bundle/'));
  const sources = await Promise.all(ours.map((url) => readFile(fileURLToPath(url), 'utf8')));
  return sources.some((source) => source.includes('function buildApp('));
}

describe.runIf(once)('what a process loads', () => {
  let dataDir: string;
  let service: ServiceProcess | undefined;
  const modulesFile = () => path.join(work, 'service.txt');
  beforeAll(async () => {
    dataDir = await serverReachableTempDir('task-service-imports-');
    service = await startServiceProcess({
      DATA_DIR: dataDir,
      NODE_OPTIONS: nodeOptions,
      LOADED_MODULES_FILE: modulesFile(),
    });
  }, 120_000);
  afterAll(async () => {
    service?.child.kill('SIGTERM');
    await service?.exited;
    await rm(dataDir, { recursive: true, force: true });
  });

  it('starts the service without the dependencies of what no request used yet; the first requests load them once', async () => {
    const url = service?.url ?? '';
    const atStart = await loadedBy(modulesFile());
    // The hook saw the start: the HTTP app and its own dependencies are there.
    expect(await loadsHttpApp(atStart)).toBe(true);
    expect(atStart.some((loaded) => /node_modules\/express\//.test(loaded))).toBe(true);
    expect(matching(atStart, LOADED_AT_FIRST_USE)).toEqual([]);

    // Concurrent first requests to the OAuth endpoints wait for the same load, and are answered as always.
    const answers = await Promise.all(
      ['/.well-known/oauth-authorization-server', '/.well-known/oauth-authorization-server', '/oauth/token'].map(
        (endpoint) =>
          fetch(
            `${url}${endpoint}`,
            endpoint === '/oauth/token' ? { method: 'POST', body: new URLSearchParams() } : {},
          ),
      ),
    );
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 400]);
    const [first, second, token] = await Promise.all(answers.map((answer) => answer.json()));
    expect(first).toEqual(second);
    expect(first).toMatchObject({
      issuer: expect.any(String),
      token_endpoint: expect.stringMatching(/\/oauth\/token$/),
    });
    expect(token).toMatchObject({ error: 'invalid_request' });
    const afterOAuth = await loadedBy(modulesFile());
    expect(matching(afterOAuth, LOADED_AT_FIRST_USE)).toEqual([
      "the SDK's OAuth handlers",
      'zod 4 (the MCP SDK)',
      'express-rate-limit (the OAuth handlers)',
    ]);
    // Each module once: the concurrent first requests shared one load.
    const handlers = afterOAuth.filter((loaded) => loaded.endsWith('/server/auth/handlers/metadata.js'));
    expect(handlers).toHaveLength(1);
  });

  it('runs a migration without the HTTP service', async () => {
    const file = path.join(work, 'migrate.txt');
    // On the running service's data directory: through its embedded server.
    const { stdout } = await runCli('migrate', [], dataDir, { NODE_OPTIONS: nodeOptions, LOADED_MODULES_FILE: file });
    expect(stdout).toContain('the database schema is current');
    const loaded = await loadedBy(file);
    expect(loaded.some((url) => url.endsWith('/dist/bundle/server/cli/migrate.js'))).toBe(true);
    expect(matching(loaded, HTTP_SERVICE)).toEqual([]);
    expect(await loadsHttpApp(loaded)).toBe(false);
  });
});
