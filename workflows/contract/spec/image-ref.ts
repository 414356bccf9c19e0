// Container image references as a container runtime reads them (the distribution project's reference grammar, with
// Docker's rule for telling a registry from a repository's first component). Pure: bundled into workflow code.

const DOMAIN_COMPONENT = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const DOMAIN_BODY = `(?:${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*|\\[[a-fA-F0-9:]+\\])(?::[0-9]+)?`;
const PATH_BODY = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
const TAG_BODY = '\\w[\\w.-]{0,127}';
const DIGEST_BODY = '[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}';
const whole = (body: string): RegExp => new RegExp(`^(?:${body})$`, 'u');
const DOMAIN = whole(DOMAIN_BODY);
const PATH_COMPONENT = whole(PATH_BODY);
const TAG = whole(TAG_BODY);
const DIGEST = whole(DIGEST_BODY);
const MAX_NAME = 255;
// Docker's rule: the first component is a registry when a "/" follows it and it has ".", ":" or a capital, or is
// localhost. The first run stops at the first of those characters, so a long component is read once.
const REGISTRY_FIRST = '(?:[^/.:A-Z]*[.:A-Z][^/]*|localhost)/';
const NAME = `(?:(?=${REGISTRY_FIRST})${DOMAIN_BODY}/|(?!${REGISTRY_FIRST}))${PATH_BODY}(?:/${PATH_BODY})*`;
const TAIL = `(?::${TAG_BODY})?(?:@${DIGEST_BODY})?`;
/** The whole grammar: the name (at most 255 characters), then an optional tag and digest. */
export const IMAGE_REFERENCE = whole(`(?=[^]{1,${MAX_NAME}}${TAIL}$)${NAME}${TAIL}`);

/** What is wrong with `ref` as an image reference, in a few words, or undefined when it is one. */
export function imageProblem(ref: string): string | undefined {
  if (IMAGE_REFERENCE.test(ref)) return undefined;
  let rest = ref;
  const at = rest.indexOf('@');
  if (at >= 0) {
    const digest = rest.slice(at + 1);
    if (!DIGEST.test(digest))
      return `its digest ${JSON.stringify(digest)} is not algorithm:hex, like sha256:<64 hex digits>`;
    rest = rest.slice(0, at);
  }
  const colon = rest.lastIndexOf(':');
  if (colon > rest.lastIndexOf('/')) {
    const tag = rest.slice(colon + 1);
    if (!TAG.test(tag)) {
      return `its tag ${JSON.stringify(tag)} is not one (letters, digits, "_", "." and "-", at most 128, not starting with "." or "-")`;
    }
    rest = rest.slice(0, colon);
  }
  if (rest.length === 0) return 'it names no repository';
  if (rest.length > MAX_NAME) return `its name is ${rest.length} characters long, more than ${MAX_NAME}`;
  // Docker's rule: the first component is a registry when it has "." or ":", is localhost, or has capitals.
  const slash = rest.indexOf('/');
  const first = slash < 0 ? '' : rest.slice(0, slash);
  const hasDomain = slash >= 0 && (/[.:]/.test(first) || first === 'localhost' || first !== first.toLowerCase());
  if (hasDomain && !DOMAIN.test(first))
    return `its registry ${JSON.stringify(first)} is not a host name with an optional port`;
  const path = hasDomain ? rest.slice(slash + 1) : rest;
  const bad = path.split('/').find((component) => !PATH_COMPONENT.test(component));
  if (bad !== undefined) {
    return `its repository part ${JSON.stringify(bad)} is not lowercase letters and digits separated by ".", "_", "__" or "-"`;
  }
  return 'it is not [registry/]repository[:tag][@digest]';
}
