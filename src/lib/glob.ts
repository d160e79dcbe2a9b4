/**
 * `*` wildcard patterns (nothing else is special), matched in linear time: the pieces between the
 * stars are found left to right, each at its first place after the previous one, the first
 * anchored at the start and the last at the end. (A backtracking regular expression made of
 * `.*` pieces takes exponential time on patterns like `*a*a*a*a*b`, and these patterns come from
 * users: allowed_tools.)
 */
export interface Glob {
  test(text: string): boolean;
}

export function glob(pattern: string): Glob {
  const parts = pattern.split("*");
  if (parts.length === 1) return { test: (text) => text === pattern };
  const head = parts[0]!;
  const tail = parts[parts.length - 1]!;
  const middle = parts.slice(1, -1).filter((p) => p !== "");
  return {
    test(text) {
      if (text.length < head.length + tail.length || !text.startsWith(head) || !text.endsWith(tail)) return false;
      let at = head.length;
      const end = text.length - tail.length;
      for (const piece of middle) {
        const i = text.indexOf(piece, at);
        if (i < 0 || i + piece.length > end) return false;
        at = i + piece.length;
      }
      return true;
    },
  };
}
