/** A minimal cookie jar for tests that play the browser (fetch in Bun keeps no cookies). */
export interface SetCookie {
  name: string;
  value: string;
  attrs: Record<string, string | true>;
  raw: string;
}

export function parseSetCookie(raw: string): SetCookie {
  const [nv, ...rest] = raw.split(";");
  const i = nv!.indexOf("=");
  const attrs: Record<string, string | true> = {};
  for (const part of rest) {
    const [k, ...v] = part.trim().split("=");
    if (k) attrs[k.toLowerCase()] = v.length ? v.join("=") : true;
  }
  return { name: nv!.slice(0, i).trim(), value: nv!.slice(i + 1).trim(), attrs, raw };
}

export const setCookies = (res: Response) => res.headers.getSetCookie().map(parseSetCookie);

export class CookieJar {
  readonly cookies = new Map<string, string>();

  absorb(res: Response): SetCookie[] {
    const all = setCookies(res);
    for (const c of all) {
      if (c.attrs["max-age"] === "0" || c.value === "") this.cookies.delete(c.name);
      else this.cookies.set(c.name, c.value);
    }
    return all;
  }

  get(name: string) {
    return this.cookies.get(name);
  }

  header(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; ");
  }
}

let n = 0;
/** A fresh documentation-range client address per call (with --trust-proxy, X-Forwarded-For). */
export function nextIp(): string {
  n++;
  return `198.51.${Math.floor(n / 250) % 250}.${(n % 250) + 1}`;
}
