#!/usr/bin/env bash
# Until the first release, the schema is one migration: regenerate migrations/0000_init.sql from
# src/db/schema.ts (and src/db/migrations.ts from the journal). After a release, use
# `bun run db:generate` to add a new migration instead.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf migrations
bunx drizzle-kit generate --name init >/dev/null
bun run scripts/migrations-index.ts
