/**
 * Request dispatch by path (exact, or below a prefix route): a path with no route is a 404, a known
 * path with the wrong method a 405 (with an Allow header).
 * @module
 */

/** What a lookup found: a handler, or why there is none. */
export type RouteMatch<H> = { kind: "found"; handler: H } | { kind: "not_found" } | {
  kind: "method_not_allowed";
  allow: string[];
};

/**
 * A table of (method, path) -> handler. A path ending in `/*` is a prefix route: it matches every
 * path below it (one more segment or more), when no exact route does.
 */
export class Router<H> {
  private readonly routes = new Map<string, Map<string, H>>();
  /** Prefix routes as [prefix with its trailing slash, registered path]. */
  private readonly prefixes: [string, string][] = [];

  /** Registers `handler` for `method` on `path`; registering one twice is a bug. */
  add(method: string, path: string, handler: H): this {
    let byMethod = this.routes.get(path);
    if (!byMethod) {
      this.routes.set(path, byMethod = new Map());
      if (path.endsWith("/*")) this.prefixes.push([path.slice(0, -1), path]);
    }
    const m = method.toUpperCase();
    if (byMethod.has(m)) throw new RangeError(`route ${m} ${path} is registered twice`);
    byMethod.set(m, handler);
    return this;
  }

  /** Finds the handler of a request; HEAD falls back to GET. Trailing slashes are ignored. */
  match(method: string, path: string): RouteMatch<H> {
    const p = path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path;
    const prefix = this.prefixes.find(([pre]) => p.startsWith(pre) && p.length > pre.length);
    const byMethod = this.routes.get(p) ?? (prefix ? this.routes.get(prefix[1]) : undefined);
    if (!byMethod) return { kind: "not_found" };
    const m = method.toUpperCase();
    const handler = byMethod.get(m) ?? (m === "HEAD" ? byMethod.get("GET") : undefined);
    if (handler !== undefined) return { kind: "found", handler };
    return { kind: "method_not_allowed", allow: [...byMethod.keys()] };
  }
}
