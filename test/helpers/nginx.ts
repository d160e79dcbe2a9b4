/**
 * A real nginx (Debian's nginx-light; ./install.sh test installs it) for the proxy tests: our own
 * process with a temporary prefix, config and logs — never the system service.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "./app.ts";

export const NGINX = Bun.which("nginx") ?? ["/usr/sbin/nginx", "/usr/local/sbin/nginx"].find((p) => existsSync(p)) ?? null;

/**
 * The `location /` block README and docs/scale.md show: proxy to `target` (an address or an
 * upstream's name) with the WebSocket upgrade and forwarded headers; `extra` lines go first.
 */
export function proxyLocation(target: string, extra: string[] = []): string {
  return `    location / {
      proxy_pass http://${target};
${extra.map((l) => `      ${l}\n`).join("")}      proxy_http_version 1.1;
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $connection_upgrade;
      proxy_read_timeout 1h;
      proxy_buffering off;
    }`;
}

export interface Nginx {
  dir: string;
  /** nginx's own output and its error log so far (for failure messages). */
  output(): string;
  stop(): Promise<void>;
}

/**
 * Starts nginx with `blocks` (upstream and server blocks) inside an `http {}` that has the
 * WebSocket `map` README and docs/scale.md show. Refused configs throw with nginx's message.
 */
export function startNginx(blocks: string, opts: { dir?: string } = {}): Nginx {
  if (!NGINX) throw new Error("nginx is not installed: these tests run a real nginx in front of runcell (Debian: apt-get install nginx-light; ./install.sh test installs it)");
  const dir = opts.dir ?? tempDir("runcell-nginx-");
  chmodSync(dir, 0o755); // nginx's workers (nobody) use the temp paths under it
  for (const d of ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"]) mkdirSync(join(dir, d), { recursive: true });
  writeFileSync(
    join(dir, "nginx.conf"),
    `worker_processes 1;
error_log ${dir}/error.log info;
events { worker_connections 256; }
http {
  access_log ${dir}/access.log;
  client_body_temp_path ${dir}/client_body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;

  map $http_upgrade $connection_upgrade {
    default upgrade;
    ''      close;
  }
${blocks}
}
`,
  );
  const args = ["-p", dir, "-c", join(dir, "nginx.conf"), "-e", join(dir, "error.log")];
  const check = Bun.spawnSync([NGINX, "-t", ...args, "-g", `pid ${dir}/nginx.pid;`], { stdout: "pipe", stderr: "pipe" });
  if (check.exitCode !== 0) throw new Error(`nginx -t refused the config: ${check.stderr.toString()}`);
  const proc = Bun.spawn([NGINX, ...args, "-g", `daemon off; pid ${dir}/nginx.pid;`], { stdout: "pipe", stderr: "pipe" });
  let out = "";
  void (async () => {
    const reader = (proc.stderr as ReadableStream<Uint8Array>).getReader();
    for (let r = await reader.read(); !r.done; r = await reader.read()) out += new TextDecoder().decode(r.value);
  })();
  return {
    dir,
    output: () => `(exit ${proc.exitCode}) ${out}${existsSync(join(dir, "error.log")) ? readFileSync(join(dir, "error.log"), "utf8") : ""}`,
    async stop() {
      if (proc.exitCode !== null) return;
      proc.kill("SIGQUIT"); // graceful stop of the master and its worker
      if ((await Promise.race([proc.exited, Bun.sleep(5000).then(() => null)])) === null) proc.kill("SIGKILL");
    },
  };
}
