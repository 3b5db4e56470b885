// The layout holds: imports only go down the layer order, folders and files import each other
// without cycles, and no source file grows past 600 lines. The layer order is written here and nowhere else
// (README's Layout section describes it). Type-only imports count: a type that climbs still ties a
// lower layer to a higher one.
//
// ARCHITECTURE_ROOT=/path/to/another/checkout runs the same checks on that tree (e.g. an older
// commit in a git worktree), so the test can be shown to fail on a tree that breaks the rules.
import { expect, test } from "bun:test";
import { fileURLToPath } from "node:url";
import {
  fileCycles,
  folderCycles,
  type ImportCycle,
  type ImportEdge,
  importsOf,
  listSources,
} from "../helpers/import_graph.ts";

/**
 * Layers from the bottom up; folders on one line are peers and import neither each other nor
 * anything above them. A file belongs to the longest entry its path starts with. mod.ts, the public
 * API, sits under the examples: they import it as a user would.
 */
const LAYER_ORDER: readonly (readonly string[])[] = [
  ["lib/core"],
  ["lib/runtime"],
  ["lib/protocol", "ffi"],
  ["lib/model"],
  ["lib/global", "lib/local"],
  ["lib/transfer", "lib/kv_events"],
  ["lib/processes"],
  ["lib/engine"],
  ["lib/server"],
  ["mod.ts"],
  ["bench", "examples"],
];

/** Where imports are read. */
const IMPORT_ROOTS = ["lib", "ffi", "bench", "examples", "mod.ts"];
/** Where file lengths are checked. */
const LENGTH_ROOTS = [...IMPORT_ROOTS, "test", "csrc"];
const SOURCE_EXTENSIONS = [".ts", ".c", ".h", ".cu", ".cuh", ".py", ".sh"];
const MAX_LINES = 600;

const ROOT = process.env.ARCHITECTURE_ROOT ?? fileURLToPath(new URL("../../", import.meta.url));

const RANK = new Map(LAYER_ORDER.flatMap((peers, rank) => peers.map((layer) => [layer, rank] as const)));

/** The layer of a file: the longest LAYER_ORDER entry that is the file or one of its folders. */
function layerOf(file: string): string | undefined {
  let best: string | undefined;
  for (const layer of RANK.keys()) {
    if ((file === layer || file.startsWith(`${layer}/`)) && (best === undefined || layer.length > best.length)) {
      best = layer;
    }
  }
  return best;
}

const sources = listSources(ROOT, IMPORT_ROOTS, [".ts"]);
const imports: ImportEdge[] = sources.flatMap(importsOf).filter((e) => e.to !== undefined);

function where(e: ImportEdge): string {
  return `${e.from}:${e.line} imports "${e.specifier}"`;
}

test("every file that imports or is imported has a layer", () => {
  const unplaced = new Set<string>();
  for (const s of sources) if (layerOf(s.file) === undefined) unplaced.add(`${s.file} is in no layer of LAYER_ORDER`);
  for (const e of imports) {
    if (layerOf(e.to!) === undefined) unplaced.add(`${where(e)}: ${e.to} is in no layer of LAYER_ORDER`);
  }
  expect([...unplaced]).toEqual([]);
});

test("imports go down the layer order, never up or sideways (type-only imports count)", () => {
  const wrong: string[] = [];
  for (const e of imports) {
    const from = layerOf(e.from), to = layerOf(e.to!);
    if (from === undefined || to === undefined || from === to) continue;
    const a = RANK.get(from)!, b = RANK.get(to)!;
    if (b > a) wrong.push(`${where(e)}: ${from} (layer ${a}) may not import ${to} (layer ${b}, above it)`);
    else if (b === a) wrong.push(`${where(e)}: ${from} may not import its peer ${to} (both layer ${a})`);
  }
  expect(wrong).toEqual([]);
});

function describeCycle(c: ImportCycle): string {
  return `${[...c.nodes, c.nodes[0]].join(" -> ")}: ${c.steps.map(where).join("; ")}`;
}

test("layers and the folders inside each layer import each other without cycles", () => {
  expect(folderCycles(imports, (file) => layerOf(file) ?? file).map(describeCycle)).toEqual([]);
});

test("files import each other without cycles", () => {
  expect(fileCycles(imports).map(describeCycle)).toEqual([]);
});

test(`no source file is over ${MAX_LINES} lines`, () => {
  const long = listSources(ROOT, LENGTH_ROOTS, SOURCE_EXTENSIONS).filter((s) => s.lines > MAX_LINES).map((s) =>
    `${s.file}: ${s.lines} lines`
  );
  expect(long).toEqual([]);
});

test("the checks see the tree: the layers exist and imports were read", () => {
  expect(sources.length).toBeGreaterThan(100);
  expect(imports.length).toBeGreaterThan(500);
  for (const layer of ["lib/core", "lib/protocol", "lib/engine", "ffi", "mod.ts"]) {
    expect(sources.some((s) => layerOf(s.file) === layer)).toBe(true);
  }
});
