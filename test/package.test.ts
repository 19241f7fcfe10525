import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serviceForFile } from './support/app.js';
import { deliverOffline, type OfflineDeliveries } from './support/offline-deliveries.js';
import { packedClient } from './support/packed-client.js';
import { isLoopback } from './support/webhook-network.js';

// The client as a user gets it: `npm pack --workspace contract`, installed into a fresh project,
// compiled with plain tsc (strict, exactOptionalPropertyTypes) and run with node, as ES module and
// as CommonJS, against a listening service. Asynchronous processes only: the service is in this one.
const run = promisify(execFile);
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const npm = (args: string[], cwd: string) =>
  run('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], { cwd });

const consumerSource = (format: 'esm' | 'cjs') => `${
  format === 'esm'
    ? "import { createClient, isProblem, ok, ProblemError, verifyWebhook, WebhookVerificationError, type Task } from '@task-service/client';"
    : "import { createClient, isProblem, ok, ProblemError, verifyWebhook, WebhookVerificationError, type Task } from '@task-service/client';\n// compiled to require()"
}
async function main(baseUrl: string): Promise<void> {
  const client = createClient({ baseUrl, timeoutMs: 10_000 });
  const email = \`package-\${crypto.randomUUID()}@example.com\`;
  await ok(client.auth.register({ body: { email, password: 'a long enough password', name: 'Package user' } }));
  const created = await ok(client.tasks.create({ body: { title: 'From the tarball (${format})', priority: 'high' } }));
  const task: Task = created.body;
  const titles: string[] = [];
  for await (const listed of client.tasks.all({ query: { status: ['todo', 'done'], priority: ['high'], limit: 1 } })) titles.push(listed.title);
  const missing = await client.tasks.get({ params: { task_id: '00000000-0000-7000-8000-000000000000' } });
  const code = isProblem(missing) ? missing.body.code : 'none';
  const thrown = await ok(client.users.list()).then(() => 'no error', (error: unknown) => (error instanceof ProblemError ? error.problem.code : 'other'));
  // The live stream: a tag created once it is open comes back as an event.
  let streamed = 'nothing';
  for await (const event of client.events.subscribe({ onOpen: () => void client.tags.create({ body: { name: 'from the package' } }) })) {
    streamed = event.type;
    break;
  }
  const forged = { headers: { 'webhook-id': 'x', 'webhook-timestamp': String(Math.floor(Date.now() / 1000)), 'webhook-signature': 'v1,AAAA' }, body: '{}' };
  const refused = await verifyWebhook('whsec_c2VjcmV0', forged).then(() => 'accepted', (error: unknown) => (error instanceof WebhookVerificationError ? 'refused' : 'other'));
  console.log(JSON.stringify({ id: task.id, version: task.version, titles, code, thrown, streamed, refused }));
}
main(process.argv[2] ?? '').catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
`;

const tsconfig = {
  compilerOptions: {
    target: 'ES2022',
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    lib: ['ES2023', 'DOM', 'DOM.Iterable'],
    types: [],
    strict: true,
    exactOptionalPropertyTypes: true,
    noUncheckedIndexedAccess: true,
    // The client's own declarations are checked too (its dependencies' as well), not TypeScript's
    // lib files: they are TypeScript's own, and checking lib.dom.d.ts cost a CPU second a run.
    skipLibCheck: false,
    skipDefaultLibCheck: true,
    outDir: 'out',
  },
  include: ['src'],
};

const service = serviceForFile({}, { listen: true });
let work: string;
let offline: OfflineDeliveries | undefined;
beforeAll(async () => {
  // task-service-verify retries its webhook's delivery once the first attempt has run.
  offline = deliverOffline(service.ctx);
  work = await mkdtemp(path.join(tmpdir(), 'task-service-package-'));
});
afterAll(async () => {
  await offline?.stop();
  await rm(work, { recursive: true, force: true });
});

describe('the client package from its tarball', () => {
  it(
    'installs alone with its two dependencies, compiles with strict tsc and runs as ESM and CommonJS',
    { timeout: 240_000 },
    async () => {
      const tarball = await packedClient();
      const project = path.join(work, 'consumer');
      await mkdir(path.join(project, 'src'), { recursive: true });
      // `process` and `console` without @types/node: the consumer needs nothing but the package.
      const nodeGlobals = 'declare const process: { argv: string[]; exitCode?: number };\n';
      await writeFile(
        path.join(project, 'package.json'),
        JSON.stringify({ name: 'consumer', private: true, type: 'module' }),
      );
      await writeFile(path.join(project, 'tsconfig.json'), JSON.stringify(tsconfig));
      await writeFile(path.join(project, 'src', 'main.mts'), nodeGlobals + consumerSource('esm'));
      await writeFile(path.join(project, 'src', 'main.cts'), nodeGlobals + consumerSource('cjs'));
      await npm(['install', '--prefer-offline', tarball], project);

      const installed = (await run('npm', ['ls', '--all', '--parseable'], { cwd: project })).stdout
        .trim()
        .split('\n')
        .slice(1);
      expect(installed.map((dir) => path.relative(path.join(project, 'node_modules'), dir)).sort()).toEqual([
        '@task-service/client',
        '@ts-rest/core',
        'zod',
      ]);
      const shipped = await readdir(path.join(project, 'node_modules', '@task-service', 'client', 'dist'));
      expect(shipped.sort()).toEqual(['cjs', 'esm']);

      await run(process.execPath, [tsc, '-p', project]);
      for (const [script, flags] of [
        ['main.mjs', []],
        ['main.cjs', ['--no-experimental-require-module']],
      ] as const) {
        const { stdout } = await run(process.execPath, [...flags, path.join(project, 'out', script), service.baseUrl]);
        const result = JSON.parse(stdout);
        expect(result, script).toMatchObject({
          version: 1,
          code: 'not_found',
          thrown: 'forbidden',
          streamed: 'tag.created',
          refused: 'refused',
        });
        expect(result.titles, script).toEqual([
          script === 'main.mjs' ? 'From the tarball (esm)' : 'From the tarball (cjs)',
        ]);
      }

      const verified = await run(path.join(project, 'node_modules', '.bin', 'task-service-verify'), [
        '--base-url',
        service.baseUrl,
      ]);
      expect(verified.stdout).toMatch(/^All \d+ operations conform to the contract\.$/m);
      expect(verified.stdout).not.toMatch(/^FAIL/m);
      expect(offline?.connections.filter((connection) => !isLoopback(connection))).toEqual([]);
    },
  );
});
