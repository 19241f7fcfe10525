// `npm run openapi [path]`: writes the OpenAPI document generated from the contract (default ./openapi.json).
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { buildOpenApiDocument } from '../openapi/document.js';
import { runCommand } from './run.js';

runCommand('openapi', async () => {
  const target = path.resolve(process.argv[2] ?? 'openapi.json');
  await mkdir(path.dirname(target), { recursive: true });
  await writeFile(target, `${JSON.stringify(buildOpenApiDocument(), null, 2)}\n`);
  console.log(`OpenAPI document written to ${target}`);
});
