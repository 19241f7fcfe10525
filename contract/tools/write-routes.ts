// `npm run routes`: writes contract/routes.ts from the contract (see routes-source.ts).
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { routesSource } from './routes-source.js';

const target = path.join(import.meta.dirname, '..', 'routes.ts');
await writeFile(target, routesSource());
console.log(`Routes written to ${target}`);
