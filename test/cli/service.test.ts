import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { renderUnit } from "../../src/cli/service.ts";
import { tempDir } from "../helpers/app.ts";
import { runCli } from "../helpers/cli.ts";

describe("runcell service install", () => {
  test("renders a hardened unit that runs serve as the given user", () => {
    const unit = renderUnit({ command: ["/usr/local/bin/runcell"], user: "agents", dataDir: "/var/lib/runcell", serveArgs: ["--public-url", "https://a.example.com", "--trust-proxy"] });
    expect(unit).toContain("ExecStart=/usr/local/bin/runcell serve --data-dir /var/lib/runcell --public-url https://a.example.com --trust-proxy");
    for (const line of ["User=agents", "SupplementaryGroups=docker", "NoNewPrivileges=true", "ProtectSystem=strict", "ReadWritePaths=/var/lib/runcell", "StateDirectory=runcell", "KillSignal=SIGTERM", "Restart=on-failure", "WantedBy=multi-user.target", "EnvironmentFile=-/etc/runcell/runcell.env"]) {
      expect(unit).toContain(line);
    }
  });

  test("--unit-dir writes the unit (no systemctl); --dry-run changes nothing", async () => {
    const dir = tempDir();
    const r = await runCli(["service", "install", "--unit-dir", dir, "--data-dir", "/srv/rc", "--", "--http", "0.0.0.0:7420"]);
    expect(r.code, r.stderr).toBe(0);
    const unit = readFileSync(join(dir, "runcell.service"), "utf8");
    expect(unit).toMatch(/^ExecStart=\S+ \S+\/src\/main\.ts serve --data-dir \/srv\/rc --http 0\.0\.0\.0:7420$/m);
    expect(unit).not.toContain("StateDirectory=");
    const dry = await runCli(["service", "install", "--dry-run"]);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain("# would write /etc/systemd/system/runcell.service");
  });

  test.each([
    [["service"], /expected "runcell service install"/],
    [["service", "install", "--user", "Bad User"], /not a valid user name/],
    [["service", "install", "--", "--bogus"], /unknown flag --bogus/],
    [["service", "install", "--", "--data-dir", "/x"], /pass --data-dir before --/],
  ])("bad usage %p exits 2", async (args, message) => {
    const r = await runCli(args as string[]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(message);
  });
});
