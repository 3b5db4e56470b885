/**
 * The import graph of a checkout, for the architecture test: every source file under some folders,
 * every module it imports (static `import`/`export ... from`, `import type`, side-effect imports,
 * dynamic `import("...")` with a literal, module augmentations, and `new URL("....ts",
 * import.meta.url)`, which is how a process root is spawned), and the cycles those imports draw
 * among files and among folders. TypeScript's own pre-processor reads the imports, so imports in comments and
 * strings do not count and multi-line imports do.
 * @module
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import ts from "typescript";

/** One import of a source file. */
export interface ImportEdge {
  /** The importing file, relative to the root, with "/" separators. */
  from: string;
  /** The specifier as written. */
  specifier: string;
  /** The imported file relative to the root; undefined for a package or a built-in module. */
  to?: string;
  /** 1-based line of the import. */
  line: number;
}

/** A source file read from the checkout. */
export interface SourceFile {
  /** Relative to the root, "/" separators. */
  file: string;
  text: string;
  lines: number;
}

const SKIPPED_DIRS = new Set(["node_modules", ".git", "build", "results"]);

/** Every file under `dirs` (relative to `root`; a file name may stand for itself) whose name ends in one of `extensions`. */
export function listSources(root: string, dirs: readonly string[], extensions: readonly string[]): SourceFile[] {
  const out: SourceFile[] = [];
  const visit = (rel: string): void => {
    const abs = path.join(root, rel);
    let st;
    try {
      st = statSync(abs);
    } catch {
      return; // a folder this checkout does not have
    }
    if (st.isDirectory()) {
      for (const name of readdirSync(abs).sort()) {
        if (!SKIPPED_DIRS.has(name)) visit(rel === "" ? name : `${rel}/${name}`);
      }
    } else if (extensions.some((e) => rel.endsWith(e))) {
      const text = readFileSync(abs, "utf8");
      out.push({ file: rel, text, lines: text.split("\n").length - (text.endsWith("\n") ? 1 : 0) });
    }
  };
  for (const d of dirs) visit(d);
  return out;
}

const URL_OF_MODULE = /new URL\(\s*(["'])([^"'\n]+\.ts)\1\s*,\s*import\.meta\.url\s*\)/g;

/** The imports of one TypeScript file. */
export function importsOf(source: SourceFile): ImportEdge[] {
  const info = ts.preProcessFile(source.text, true, true);
  const found: { specifier: string; pos: number }[] = info.importedFiles.map((f) => ({
    specifier: f.fileName,
    pos: f.pos,
  }));
  for (const m of source.text.matchAll(URL_OF_MODULE)) found.push({ specifier: m[2]!, pos: m.index! });
  return found.map(({ specifier, pos }) => ({
    from: source.file,
    specifier,
    to: specifier.startsWith(".")
      ? path.posix.normalize(path.posix.join(path.posix.dirname(source.file), specifier))
      : undefined,
    line: source.text.slice(0, pos).split("\n").length,
  }));
}

/** The folder of a file relative to the root ("." for a file at the root). */
export function folderOf(file: string): string {
  return path.posix.dirname(file);
}

/** A cycle of nodes (files or folders) with, for each step, one import that makes it. */
export interface ImportCycle {
  nodes: string[];
  /** steps[i] goes from nodes[i] to nodes[(i + 1) % length]. */
  steps: ImportEdge[];
}

/** The cycles among files: one per strongly connected set of two or more files. */
export function fileCycles(edges: readonly ImportEdge[]): ImportCycle[] {
  return cyclesOf(edges.filter((e) => e.to !== undefined).map((e) => [e.from, e.to!, e] as const));
}

/**
 * The cycles among folders. `unitOf` names the top-level units (the layers): an import between two
 * units is an arrow between them. Inside one unit a folder counts as one, its subfolders included,
 * toward its siblings: an import from u/x/f.ts to u/y/z/g.ts is an arrow x -> y under u. A folder's
 * own files and its subfolders may import each other (the parent holds what its parts share, or
 * gathers them), so an import between a folder and one inside it draws no arrow.
 */
export function folderCycles(edges: readonly ImportEdge[], unitOf: (file: string) => string): ImportCycle[] {
  const arrows: (readonly [string, string, ImportEdge])[] = [];
  for (const e of edges) {
    if (e.to === undefined) continue;
    const ua = unitOf(e.from), ub = unitOf(e.to);
    if (ua !== ub) {
      arrows.push([ua, ub, e]);
      continue;
    }
    const a = folderOf(e.from).split("/"), b = folderOf(e.to).split("/");
    let common = 0;
    while (common < a.length && common < b.length && a[common] === b[common]) common++;
    if (common === a.length || common === b.length) continue; // the same folder, or one inside the other
    arrows.push([a.slice(0, common + 1).join("/"), b.slice(0, common + 1).join("/"), e]);
  }
  return cyclesOf(arrows);
}

/** One cycle per strongly connected set of two or more nodes, with one import per step. */
function cyclesOf(arrows: readonly (readonly [string, string, ImportEdge])[]): ImportCycle[] {
  const next = new Map<string, Map<string, ImportEdge>>();
  for (const [a, b, e] of arrows) {
    if (a === b) continue;
    if (!next.has(a)) next.set(a, new Map());
    if (!next.get(a)!.has(b)) next.get(a)!.set(b, e);
  }
  const cycles: ImportCycle[] = [];
  for (const component of stronglyConnected(next)) {
    if (component.length < 2) continue;
    const inside = new Set(component);
    const start = [...component].sort()[0]!;
    const route = shortestRoute(next, inside, start);
    cycles.push({ nodes: route, steps: route.map((f, i) => next.get(f)!.get(route[(i + 1) % route.length]!)!) });
  }
  return cycles;
}

/** Tarjan's algorithm. */
function stronglyConnected(next: Map<string, Map<string, ImportEdge>>): string[][] {
  const index = new Map<string, number>(), low = new Map<string, number>(), onStack = new Set<string>();
  const stack: string[] = [], out: string[][] = [];
  let counter = 0;
  const visit = (v: string): void => {
    index.set(v, counter);
    low.set(v, counter++);
    stack.push(v);
    onStack.add(v);
    for (const w of next.get(v)?.keys() ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      out.push(component);
    }
  };
  for (const v of [...next.keys()].sort()) if (!index.has(v)) visit(v);
  return out;
}

/** The shortest way from `start` back to itself inside one strongly connected set. */
function shortestRoute(next: Map<string, Map<string, ImportEdge>>, inside: Set<string>, start: string): string[] {
  const cameFrom = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const v = queue.shift()!;
    for (const w of [...(next.get(v)?.keys() ?? [])].sort()) {
      if (!inside.has(w)) continue;
      if (w === start) {
        const route = [v];
        while (route[0] !== start) route.unshift(cameFrom.get(route[0]!)!);
        return route;
      }
      if (!cameFrom.has(w)) {
        cameFrom.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start];
}
