/**
 * A unix socket in front of the local Docker engine that passes every request through, except
 * that while `hold` is set a `POST …/containers/create` is kept waiting for ever (its connection
 * open, nothing forwarded) — a workspace start caught mid-way, for tests that kill the server then.
 */
import { rmSync } from "node:fs";
import { createConnection, createServer, type Socket } from "node:net";
import { join } from "node:path";
import { tempDir } from "./app.ts";

export interface DockerProxy {
  /** The value for `--docker-host`. */
  host: string;
  hold: boolean;
  /** Container creations held so far. */
  held: number;
  stop(): void;
}

const CREATE = /^POST \S*\/containers\/create/m;

export function startDockerProxy(engine = "/var/run/docker.sock"): DockerProxy {
  const path = join(tempDir(), "docker.sock");
  const sockets = new Set<Socket>();
  const proxy: DockerProxy = {
    host: `unix://${path}`,
    hold: false,
    held: 0,
    stop() {
      for (const s of sockets) s.destroy();
      server.close();
      rmSync(path, { force: true });
    },
  };
  const server = createServer((client) => {
    const up = createConnection(engine);
    sockets.add(client).add(up);
    let stuck = false;
    client.on("data", (chunk) => {
      if (!stuck && proxy.hold && CREATE.test(chunk.toString("latin1"))) {
        stuck = true;
        proxy.held++;
      }
      if (!stuck) up.write(chunk);
    });
    up.pipe(client);
    const end = () => {
      client.destroy();
      up.destroy();
      sockets.delete(client);
      sockets.delete(up);
    };
    client.on("close", end).on("error", end);
    up.on("close", end).on("error", end);
  });
  server.listen(path);
  return proxy;
}
