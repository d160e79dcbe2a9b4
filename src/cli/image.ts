/** `runcell image build`: the default workspace image, built locally with no registry. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isImageReference } from "../lib/image-ref.ts";
import { parseArgs, resolveConfig } from "../config.ts";
import { aptMirror, buildImage, DEFAULT_MIRROR, DEFAULT_SUITE, DEFAULT_TAG, PACKAGES } from "../workspaces/build-image.ts";
import { DockerEngine } from "../workspaces/docker.ts";
import { type Command, failUsage, UsageError } from "./command.ts";

const USAGE = "runcell image build [--tag T] [--suite S] [--mirror URL] [--rootfs DIR] [--keep] [--docker-host H]";

export const imageCommand: Command = {
  name: "image",
  summary: "Build the default workspace image locally (debootstrap of Debian + docker import; no registry).",
  usage: USAGE,
  details: `  build            debootstrap --variant=minbase of Debian with ${PACKAGES.join(", ")},
                   then docker import (needs root and debootstrap; takes a few minutes)
  --tag T          image to create (default ${DEFAULT_TAG}; use it with --workspace-image)
  --suite S        Debian suite (default ${DEFAULT_SUITE})
  --mirror URL     Debian mirror (default: the one apt uses here, else ${DEFAULT_MIRROR})
  --rootfs DIR     import this root filesystem instead of running debootstrap
  --keep           keep the debootstrapped tree (its path is printed)
  --docker-host H  Docker engine (default unix:///var/run/docker.sock)`,
  examples: ["sudo runcell image build", "sudo runcell image build --tag runcell/workspace:bookworm --mirror http://ftp.de.debian.org/debian", "runcell image build --rootfs ./my-rootfs --tag my/workspace:1"],
  configFlags: false,
  async run(argv) {
    let opts;
    try {
      const args = parseArgs(argv, { tag: true, suite: true, mirror: true, rootfs: true, keep: false, "docker-host": true }, false);
      const [sub, ...rest] = args.positionals;
      if (sub !== "build") throw new UsageError(sub ? `unknown subcommand "${sub}" (usage: ${USAGE})` : `missing subcommand (usage: ${USAGE})`);
      if (rest.length) throw new UsageError(`unexpected argument "${rest[0]}"`);
      const tag = String(args.extra.get("tag") ?? DEFAULT_TAG);
      if (!isImageReference(tag)) throw new UsageError(`--tag: "${tag}" is not a valid image reference (like runcell/workspace:latest)`);
      const suite = String(args.extra.get("suite") ?? DEFAULT_SUITE);
      if (!/^[a-z][a-z0-9.-]*$/.test(suite)) throw new UsageError(`--suite: "${suite}" is not a Debian suite name`);
      const mirror = String(args.extra.get("mirror") ?? aptMirror() ?? DEFAULT_MIRROR);
      if (!/^https?:\/\/\S+$/.test(mirror)) throw new UsageError(`--mirror: expected an http(s) URL, got "${mirror}"`);
      const dockerHost = args.extra.has("docker-host") ? String(args.extra.get("docker-host")) : resolveConfig(new Map(), process.env, ["docker-host"]).dockerHost;
      const rootfs = args.extra.get("rootfs") as string | undefined;
      opts = { tag, suite, mirror, dockerHost, rootfs, keep: args.extra.get("keep") === true };
    } catch (e) {
      return failUsage("image", e);
    }
    let engine: DockerEngine;
    try {
      engine = new DockerEngine(opts.dockerHost);
    } catch (e) {
      return failUsage("image", new UsageError((e as Error).message));
    }
    const workDir = mkdtempSync(join(tmpdir(), "runcell-image-"));
    console.log(`runcell image build: ${opts.tag} ${opts.rootfs ? `from ${opts.rootfs}` : `from Debian ${opts.suite} (${opts.mirror})`}`);
    try {
      const r = await buildImage({ client: engine.client, ...opts, workDir, out: (l) => console.log(l) });
      console.log(`built ${opts.tag} (${r.id.slice(0, 19)}, ${(r.size / 1e6).toFixed(0)} MB) in ${(r.ms / 1000).toFixed(1)} s`);
      if (opts.keep && !opts.rootfs) console.log(`root filesystem kept in ${join(workDir, "rootfs")}`);
      if (opts.tag !== DEFAULT_TAG) console.log(`use it with: runcell serve --workspace-image ${opts.tag}`);
      return 0;
    } catch (e) {
      console.error(`runcell image build: ${(e as Error).message}`);
      return 1;
    } finally {
      if (!opts.keep || opts.rootfs) rmSync(workDir, { recursive: true, force: true });
    }
  },
};
