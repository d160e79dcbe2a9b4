import pkg from "../package.json";

declare const RUNCELL_COMMIT: string | undefined;

export const VERSION: string = pkg.version;
/** Injected by scripts/build.ts (`--define`); "dev" when running from source. */
export const COMMIT: string = typeof RUNCELL_COMMIT === "string" ? RUNCELL_COMMIT : "dev";
export const USER_AGENT = `runcell/${VERSION}`;
