// `npm run prisma:migration -- <name> [base]`: writes the SQL that takes the schema at git
// revision `base` (default HEAD) to the working prisma/schema.prisma, as a new migration folder.
// Prisma's differ runs on its WASM engine; test/migrations.test.ts then proves that the whole
// history still produces exactly schema.prisma.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startEmbeddedPostgres } from '../server/db/embedded-postgres.js';

const [name, base = 'HEAD'] = process.argv.slice(2);
if (!name || !/^[a-z0-9_]+$/.test(name)) {
  console.error('usage: npm run prisma:migration -- <snake_case_name> [git revision of the previous schema]');
  process.exit(2);
}
const previous = path.join(mkdtempSync(path.join(tmpdir(), 'schema-')), 'schema.prisma');
writeFileSync(previous, execFileSync('git', ['show', `${base}:prisma/schema.prisma`]));
// Prisma's WASM engine wants a database to reach, though a diff of two files changes nothing there.
const scratch = mkdtempSync(path.join(tmpdir(), 'prisma-diff-'));
chmodSync(scratch, 0o711);
const server = await startEmbeddedPostgres(scratch);
let sql: string;
try {
  sql = execFileSync(
    'npx',
    [
      '--no-install',
      'prisma',
      'migrate',
      'diff',
      '--from-schema-datamodel',
      previous,
      '--to-schema-datamodel',
      'prisma/schema.prisma',
      '--script',
    ],
    // CHECKPOINT_DISABLE: Prisma's CLI never calls its update-check host.
    { encoding: 'utf8', env: { ...process.env, PRISMA_DIFF_DATABASE_URL: server.url, CHECKPOINT_DISABLE: '1' } },
  );
} finally {
  await server.stop();
  rmSync(scratch, { recursive: true, force: true });
}
if (/^-- This is an empty migration\.?\s*$/m.test(sql) || sql.trim() === '') {
  console.log('schema.prisma matches the base revision: no migration written');
  process.exit(0);
}
const stamp = new Date().toISOString().replace(/\D/g, '').slice(0, 14);
const dir = path.join('prisma', 'migrations', `${stamp}_${name}`);
mkdirSync(dir, { recursive: true });
writeFileSync(path.join(dir, 'migration.sql'), sql);
console.log(`wrote ${dir}/migration.sql`);
