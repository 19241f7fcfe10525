// The Prisma CLI is used only to generate the client and to author migration SQL with
// `prisma migrate diff`; `engine: 'js'` keeps it on its WASM schema engine (no native binary to
// download). The service applies migrations itself (server/db/migrate.ts).
import { defineConfig } from 'prisma/config';
import { PrismaPGlite } from 'pglite-prisma-adapter';
import { PGlite } from '@electric-sql/pglite';

export default defineConfig({
  schema: 'prisma/schema.prisma',
  experimental: { adapter: true },
  engine: 'js',
  adapter: async () => new PrismaPGlite(await PGlite.create()),
});
