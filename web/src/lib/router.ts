/** A tiny history router: the current path (and a query parameter) as Preact hooks, and navigate(). */
import { useEffect, useState } from "preact/hooks";

const listeners = new Set<() => void>();
addEventListener("popstate", () => {
  for (const l of listeners) l();
});

export function navigate(path: string, replace = false) {
  if (path === location.pathname + location.search) return;
  if (replace) history.replaceState(null, "", path);
  else history.pushState(null, "", path);
  for (const l of listeners) l();
}

export function usePath(): string {
  const [path, setPath] = useState(location.pathname);
  useEffect(() => {
    const l = () => setPath(location.pathname);
    listeners.add(l);
    return () => void listeners.delete(l);
  }, []);
  return path;
}

/** The current URL's query parameter `name` ("" when absent); it follows navigate() and Back. */
export function useQueryParam(name: string): string {
  const read = () => new URLSearchParams(location.search).get(name) ?? "";
  const [value, setValue] = useState(read);
  useEffect(() => {
    const l = () => setValue(read());
    listeners.add(l);
    return () => void listeners.delete(l);
  }, [name]);
  return value;
}

/** Click handler for in-app links: keeps modifier-clicks (new tab) to the browser. */
export function linkTo(path: string) {
  return (e: MouseEvent) => {
    if (e.metaKey || e.ctrlKey || e.shiftKey || e.button !== 0) return;
    e.preventDefault();
    navigate(path);
  };
}
