// Loaded before every test file (bunfig.toml). Tests never read the developer's environment:
// configuration comes from the flags each helper passes explicitly.
for (const key of Object.keys(process.env)) {
  if (key.startsWith("RUNCELL_") && key !== "RUNCELL_TEST_IMAGE" && key !== "RUNCELL_TEST_POSTGRES") delete process.env[key];
}
delete process.env.ANTHROPIC_API_KEY;
delete process.env.OPENAI_API_KEY;

// Tests start servers, containers and subprocesses: 5 s (Bun's default) is too tight on 2 cores.
// setDefaultTimeout here reaches only the first file: the suite runs with `bun test --timeout 60000`
// (`bun run test`, ./install.sh test), and this covers a single file run with plain `bun test`.
import { setDefaultTimeout } from "bun:test";
setDefaultTimeout(60_000);

// The server embeds the dashboard's build (web/dist/bundle.json): rebuild it when web/ changed.
import { buildWeb, webIsStale } from "../../scripts/build-web.ts";
if (webIsStale()) await buildWeb({ quiet: true });
