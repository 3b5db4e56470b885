// The settings table (lib/runtime/env.ts) is the one list of environment variables: every LMPOOL_*
// name the code or the native library reads is a row, README's Settings section is the table as
// rendered, and a bad value is an error naming the variable and the value.
import { expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parseSetting, SETTINGS, settingsMarkdown } from "../../../lib/runtime/env.ts";

const ROOT = fileURLToPath(new URL("../../../", import.meta.url));

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = `${dir}/${name}`;
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

test("every LMPOOL_* variable read in lib/, ffi/ and csrc/ is a row of the table", () => {
  // Names that are not variables: the version constant and the header's include guard.
  const notVariables = new Set(["LMPOOL_VERSION", "LMPOOL_H"]);
  const missing = new Set<string>();
  for (const dir of ["lib", "ffi", "csrc"]) {
    for (const file of filesUnder(`${ROOT}${dir}`)) {
      for (const [name] of readFileSync(file, "utf8").matchAll(/\bLMPOOL_[A-Z][A-Z0-9_]*/g)) {
        if (!notVariables.has(name) && !(name in SETTINGS)) missing.add(`${name} (${file.slice(ROOT.length)})`);
      }
    }
  }
  expect([...missing]).toEqual([]);
});

test("README's Settings section is the table, as settingsMarkdown renders it", () => {
  const readme = readFileSync(`${ROOT}README.md`, "utf8");
  const begin = "<!-- settings:begin -->\n", end = "\n<!-- settings:end -->";
  const at = readme.indexOf(begin);
  expect(at).toBeGreaterThanOrEqual(0);
  const section = readme.slice(at + begin.length, readme.indexOf(end, at));
  expect(section).toBe(settingsMarkdown());
  for (const name of Object.keys(SETTINGS)) expect(section).toContain(`\`${name}\``);
});

test("values parse to their types; unset and empty are undefined", () => {
  expect(parseSetting("LMPOOL_BACKEND", "cuda")).toBe("cuda");
  expect(parseSetting("LMPOOL_BACKEND", undefined)).toBeUndefined();
  expect(parseSetting("LMPOOL_BACKEND", "")).toBeUndefined();
  expect(parseSetting("LMPOOL_NVLINK_PAIRS", "0-1, 2-3")).toEqual([[0, 1], [2, 3]]);
  expect(parseSetting("LMPOOL_NVLINK_PAIRS", "none")).toBe("none");
  expect(parseSetting("LMPOOL_TRACE_TRANSFERS", "1")).toBe("log");
  expect(parseSetting("LMPOOL_TRACE_TRANSFERS", "/tmp/trace.log")).toEqual({ file: "/tmp/trace.log" });
  expect(parseSetting("LMPOOL_LIB_DIR", "/opt/lmpool/")).toBe("/opt/lmpool");
  expect(parseSetting("OMP_NUM_THREADS", "4")).toBe(4);
});

test("a bad value is a RangeError naming the variable and the value", () => {
  expect(() => parseSetting("LMPOOL_BACKEND", "gpu")).toThrow('LMPOOL_BACKEND must be "cpu" or "cuda", got "gpu"');
  expect(() => parseSetting("LMPOOL_SOCKETS", "uv")).toThrow('LMPOOL_SOCKETS must be "bun" or "node", got "uv"');
  expect(() => parseSetting("LMPOOL_CUDA_GRAPHS", "off")).toThrow('LMPOOL_CUDA_GRAPHS must be "0" or "1", got "off"');
  expect(() => parseSetting("LMPOOL_NVLINK_PAIRS", "0:1")).toThrow(/LMPOOL_NVLINK_PAIRS.*"0:1"/);
  expect(() => parseSetting("LMPOOL_NVLINK_PAIRS", "2-2")).toThrow(/LMPOOL_NVLINK_PAIRS.*itself/);
  expect(() => parseSetting("OMP_NUM_THREADS", "0")).toThrow(RangeError);
  expect(() => parseSetting("LMPOOL_CODEC_WARMUP", "1.5")).toThrow(
    'LMPOOL_CODEC_WARMUP must be a non-negative integer, got "1.5"',
  );
});

test("a bad value in the environment fails the process that reads it, naming it", () => {
  const child = Bun.spawnSync({
    cmd: [
      process.execPath,
      "-e",
      `import("${ROOT}ffi/loader.ts").then((m) => m.loadLibrary()).catch((e) => { console.error(e.message); process.exit(3); })`,
    ],
    env: { ...process.env, LMPOOL_CUDA_PDL: "yes" },
    stderr: "pipe",
  });
  expect(child.exitCode).toBe(3);
  expect(child.stderr.toString()).toContain('LMPOOL_CUDA_PDL must be "0" or "1", got "yes"');
});
