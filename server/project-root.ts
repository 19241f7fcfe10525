import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';

/** The project's folder (the one with package.json), whether running from the sources or from dist/. */
function findProjectRoot(): string {
  for (let dir = path.dirname(fileURLToPath(import.meta.url)); ; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, 'package.json'))) return dir;
    if (path.dirname(dir) === dir) throw new Error('package.json not found above the service code');
  }
}

export const PROJECT_ROOT = findProjectRoot();

/** The service's version, from its package.json. */
export const packageVersion = (): string =>
  z.object({ version: z.string() }).parse(JSON.parse(readFileSync(path.join(PROJECT_ROOT, 'package.json'), 'utf8')))
    .version;
