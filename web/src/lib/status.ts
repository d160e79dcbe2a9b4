/**
 * What the whole page is going through, shown by the shell: slowed down by the server's rate limit
 * (until when: requests and stream messages are retried after the server's retry_after), or signed
 * out (a 401, or the stream closed with 4001: the sign-in form replaces the page).
 */
import { useEffect, useState } from "preact/hooks";

export const status = { slowUntil: 0, signedOut: false };
const listeners = new Set<() => void>();
const notify = () => {
  for (const l of listeners) l();
};

/** The server asked us to wait `seconds` before the next request or message. */
export function slowedDown(seconds: number) {
  status.slowUntil = Math.max(status.slowUntil, Date.now() + seconds * 1000);
  notify();
}

export function signedOut() {
  if (status.signedOut) return;
  status.signedOut = true;
  notify();
}

/** Re-renders on every change of `status` (and, with `everySecond`, each second while slowed down). */
export function useStatus(everySecond = false) {
  const [, setTick] = useState(0);
  useEffect(() => {
    const l = () => setTick((n) => n + 1);
    listeners.add(l);
    const timer = everySecond ? setInterval(() => status.slowUntil > Date.now() - 1000 && l(), 1000) : undefined;
    return () => {
      listeners.delete(l);
      clearInterval(timer);
    };
  }, []);
  return { slowFor: Math.max(0, Math.ceil((status.slowUntil - Date.now()) / 1000)), signedOut: status.signedOut };
}
