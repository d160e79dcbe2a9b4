/** Reading a secret from the terminal without echoing it (for `runcell admin set-password`). */
import { UsageError } from "./command.ts";

/** Prompts on stderr and reads one line from the terminal in raw mode, echoing nothing. */
export function promptHidden(question: string): Promise<string> {
  const stdin = process.stdin;
  if (!stdin.isTTY) return Promise.reject(new UsageError("stdin is not a terminal: pass --stdin (or --password-stdin) and pipe the password in"));
  // Echo goes off before the prompt appears, so nothing typed after it is ever shown.
  stdin.setRawMode(true);
  stdin.setEncoding("utf8");
  stdin.resume();
  process.stderr.write(question);
  return new Promise((resolve, reject) => {
    let buf = "";
    const done = (err: Error | null) => {
      stdin.off("data", onData);
      stdin.setRawMode(false);
      stdin.pause();
      process.stderr.write("\n");
      if (err) reject(err);
      else resolve(buf);
    };
    const onData = (chunk: string) => {
      for (const ch of chunk) {
        if (ch === "\r" || ch === "\n") return done(null);
        if (ch === "\u0003") return done(new UsageError("cancelled"));
        if (ch === "\u0004") return buf ? done(null) : done(new UsageError("cancelled"));
        if (ch === "\u007f" || ch === "\b") buf = buf.slice(0, -1);
        else if (ch === "\u0015") buf = "";
        else if (ch >= " ") buf += ch;
      }
    };
    stdin.on("data", onData);
  });
}
