/**
 * Docker image reference syntax (the grammar of the distribution "reference" package):
 *
 *   reference := name [":" tag] ["@" digest]
 *   name      := [domain "/"] path-component ["/" path-component]*
 *   domain    := host [":" port]          host := dns-name | "[" IPv6 "]"
 *   path-component := [a-z0-9]+ (separator [a-z0-9]+)*   separator := [_.] | "__" | "-"+
 *   tag       := [\w][\w.-]{0,127}        digest := algorithm ":" hex (32+ hex digits)
 *
 * Only syntax is checked here; whether the image exists is the runtime's business.
 */
const DOMAIN_COMPONENT = "(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])";
const DOMAIN = `(?:${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*|\\[[0-9a-fA-F:]+\\])(?::[0-9]{1,5})?`;
const PATH_COMPONENT = "[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*";
const NAME = `(?:${DOMAIN}/)?${PATH_COMPONENT}(?:/${PATH_COMPONENT})*`;
const TAG = "[\\w][\\w.-]{0,127}";
const DIGEST = "[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}";
const REFERENCE = new RegExp(`^(${NAME})(?::${TAG})?(?:@${DIGEST})?$`);

/** Longest repository name Docker accepts. */
export const IMAGE_NAME_MAX = 255;

export function isImageReference(ref: string): boolean {
  const m = REFERENCE.exec(ref);
  return !!m && m[1]!.length <= IMAGE_NAME_MAX;
}
