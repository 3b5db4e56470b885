// The public surface stays small: mod.ts exports at most 20 values (what applications need), the
// rest sits behind subpath exports, which package.json and deno.json declare alike.
import { expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

test("mod.ts exports at most 20 values, LLM, LLMEngine and serve among them", async () => {
  const mod = await import("../../mod.ts");
  const names = Object.keys(mod);
  expect(names.length).toBeLessThanOrEqual(20);
  for (const name of ["LLM", "LLMEngine", "serve", "listen", "ensureModel", "NativeError", "WorkerDiedError"]) {
    expect(names).toContain(name);
  }
});

test("package.json and deno.json declare the same subpath exports, each an existing module", () => {
  const pkg = JSON.parse(readFileSync(`${ROOT}package.json`, "utf8")).exports as Record<string, string>;
  const deno = JSON.parse(readFileSync(`${ROOT}deno.json`, "utf8")).exports as Record<string, string>;
  expect(deno).toEqual(pkg);
  expect(pkg["."]).toBe("./mod.ts");
  for (const [subpath, file] of Object.entries(pkg)) {
    expect({ subpath, exists: existsSync(`${ROOT}${file}`) }).toEqual({ subpath, exists: true });
  }
});
