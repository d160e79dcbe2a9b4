import { defineConfig } from "drizzle-kit";

// The PostgreSQL side: src/db/pg/schema.ts (kept identical to src/db/schema.ts by
// test/db/pg-schema.test.ts) → migrations-pg/.
export default defineConfig({
  dialect: "postgresql",
  schema: "./src/db/pg/schema.ts",
  out: "./migrations-pg",
});
