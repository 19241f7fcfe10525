// The Prisma CLI is used only to generate the Kysely table types and to author migration SQL with
// `prisma migrate diff`; `engine: 'js'` keeps it on its WASM schema engine (no native binary to
// download), which wants an adapter and a database to reach (PRISMA_DIFF_DATABASE_URL; it changes
// nothing there) even to diff two schema files. The service applies migrations itself
// (server/db/migrate.ts).
import { defineConfig } from 'prisma/config';
import { PrismaPg } from '@prisma/adapter-pg';

// Every run of the CLI in this project (npm install's `prisma generate`, @prisma/client's own
// install step, `prisma migrate diff`) leaves Prisma's update-check host alone.
process.env.CHECKPOINT_DISABLE ??= '1';
// No query engine: the project generates no Prisma Client (only the Kysely table types), and without
// this `prisma generate` would download the native engine library from Prisma's host.
process.env.PRISMA_CLIENT_ENGINE_TYPE ??= 'client';

export default defineConfig({
  schema: 'prisma/schema.prisma',
  experimental: { adapter: true },
  engine: 'js',
  adapter: async () =>
    new PrismaPg({ connectionString: process.env.PRISMA_DIFF_DATABASE_URL ?? 'postgresql://unused@localhost/unused' }),
});
