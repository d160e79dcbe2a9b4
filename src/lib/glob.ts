/** A `*` wildcard pattern (nothing else is special) as an anchored regular expression. */
export const globRe = (pattern: string): RegExp => new RegExp(`^${pattern.split("*").map((s) => s.replace(/[.+?^${}()|[\]\\]/g, "\\$&")).join(".*")}$`);
