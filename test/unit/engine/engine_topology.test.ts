// The topology LLMEngine resolves: ranks that share a CUDA device are direct partners of kind
// "same-device" whatever the NVLink setting says ("none", explicit pairs, "auto"), and "auto" maps
// the NV# links of `nvidia-smi topo -m` (a fake nvidia-smi on PATH here, a real subprocess) onto
// the ranks placed on those devices. The launch config then gives each worker its same-device
// partner with the partner's device.
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { fileURLToPath } from "node:url";
import { resolveTopology } from "../../../lib/engine/engine_topology.ts";
import { workerDataPath } from "../../../lib/engine/worker_launch_config.ts";
import { NvlinkTopology } from "../../../lib/global/topology.ts";
import { resolveTransferOptions } from "../../../lib/transfer/control/transfer_config.ts";

const quiet = () => {};
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A folder holding an executable `nvidia-smi` that prints `matrix`. */
function fakeNvidiaSmi(matrix: string): string {
  const dir = mkdtempSync(`${tmpdir()}/lmp-smi-`);
  dirs.push(dir);
  writeFileSync(`${dir}/matrix.txt`, matrix);
  writeFileSync(`${dir}/nvidia-smi`, `#!/bin/sh\nexec /bin/cat "${dir}/matrix.txt"\n`);
  chmodSync(`${dir}/nvidia-smi`, 0o755);
  return dir;
}

const MODULE = fileURLToPath(new URL("../../../lib/engine/engine_topology.ts", import.meta.url));

/**
 * The pairs and kinds resolveTopology gives in a fresh process whose PATH starts with `smiDir`
 * (or holds no nvidia-smi at all when it is undefined), with `env` set: a process reads PATH once.
 */
async function kindsIn(
  smiDir: string | undefined,
  input: string | undefined,
  gpus: number | number[],
  env: Record<string, string> = {},
): Promise<string[]> {
  const script = `const { resolveTopology } = await import(${JSON.stringify(MODULE)});
const t = await resolveTopology(${JSON.stringify(input)}, ${JSON.stringify(gpus)}, () => {});
console.log(JSON.stringify(t.pairs.map(([a, b]) => \`\${a}-\${b} \${t.kind(a, b)}\`)));`;
  const child = Bun.spawn([process.execPath, "-e", script], {
    env: { HOME: process.env.HOME ?? "/tmp", ...env, PATH: smiDir ?? "/nonexistent" },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
    child.exited,
  ]);
  if (code !== 0) throw new Error(`resolveTopology child exited ${code}: ${err}`);
  return JSON.parse(out.trim().split("\n").at(-1)!) as string[];
}

// Four GPUs: NVLink between 0-1 and between 2-3 only.
const FOUR_GPU = [
  "\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity",
  "GPU0\t X \tNV4\tSYS\tSYS\t0-15\t0",
  "GPU1\tNV4\t X \tSYS\tSYS\t0-15\t0",
  "GPU2\tSYS\tSYS\t X \tNV4\t16-31\t1",
  "GPU3\tSYS\tSYS\tNV4\t X \t16-31\t1",
  "",
  "Legend:",
].join("\n");
const ONE_GPU = ["\tGPU0\tCPU Affinity\tNUMA Affinity", "GPU0\t X \t0-15\t0", "", "Legend:"].join("\n");

const kinds = (t: NvlinkTopology) => t.pairs.map(([a, b]) => `${a}-${b} ${t.kind(a, b)}`);

describe("same-device pairs", () => {
  test("--gpus 0,0 gives pair 0-1 of kind same-device, whatever the NVLink setting", async () => {
    for (const input of ["none", "", [] as [number, number][]]) {
      const t = await resolveTopology(input, [0, 0], quiet);
      expect(kinds(t)).toEqual(["0-1 same-device"]);
      expect(t.partners(0)).toEqual([1]);
      expect(t.affinity(0, 1)).toBe(1);
      expect(t.describe()).toBe("0-1 (same device)");
    }
    // "auto" on a one-GPU machine, and on one without nvidia-smi.
    expect(await kindsIn(fakeNvidiaSmi(ONE_GPU), "auto", [0, 0])).toEqual(["0-1 same-device"]);
    expect(await kindsIn(undefined, "auto", [0, 0])).toEqual(["0-1 same-device"]);
    expect(await kindsIn(undefined, "auto", 2)).toEqual([]); // a count: one rank per device
  });

  test("LMPOOL_NVLINK_PAIRS (none, or pairs) still pairs ranks of one device", async () => {
    const smi = fakeNvidiaSmi(FOUR_GPU);
    expect(await kindsIn(smi, undefined, [1, 1, 0], { LMPOOL_NVLINK_PAIRS: "none" })).toEqual(["0-1 same-device"]);
    expect(await kindsIn(smi, undefined, [1, 1, 0], { LMPOOL_NVLINK_PAIRS: "1-2" })).toEqual([
      "0-1 same-device",
      "1-2 nvlink",
    ]);
  });

  test("explicit pairs and a given topology keep their NVLink pairs and gain the same-device ones", async () => {
    const t = await resolveTopology("0-2", [0, 0, 1], quiet);
    expect(kinds(t)).toEqual(["0-1 same-device", "0-2 nvlink"]);
    expect(t.describe()).toBe("0-1 (same device),0-2");
    expect(kinds(await resolveTopology(new NvlinkTopology(3, [[1, 2]]), [0, 0, 1], quiet))).toEqual([
      "0-1 same-device",
      "1-2 nvlink",
    ]);
    expect(new NvlinkTopology(2, []).describe()).toBe("none");
    await expect(resolveTopology(new NvlinkTopology(2, []), [0, 0, 0], quiet)).rejects.toThrow(
      "topology is for 2 ranks, the engine has 3",
    );
    expect(() => new NvlinkTopology(2, [], [0])).toThrow("devices lists 1 CUDA devices for 2 ranks");
  });
});

describe("auto: NV# links mapped through the ranks' devices", () => {
  test("ranks on linked devices are NVLink pairs, ranks of one device same-device pairs", async () => {
    const smi = fakeNvidiaSmi(FOUR_GPU);
    expect(await kindsIn(smi, "auto", 4)).toEqual(["0-1 nvlink", "2-3 nvlink"]);
    // Two ranks on each of devices 0 and 1 (linked): all four are partners.
    expect(await kindsIn(smi, "auto", [0, 0, 1, 1])).toEqual([
      "0-1 same-device",
      "0-2 nvlink",
      "0-3 nvlink",
      "1-2 nvlink",
      "1-3 nvlink",
      "2-3 same-device",
    ]);
    // Rank 0 on device 3, rank 1 on device 2 (linked), rank 2 on device 0 (linked to neither).
    expect(await kindsIn(smi, "auto", [3, 2, 0])).toEqual(["0-1 nvlink"]);
  });

  test("device ids are logical: CUDA_VISIBLE_DEVICES=2,3,0 makes physical 2-3 the logical pair 0-1", async () => {
    const smi = fakeNvidiaSmi(FOUR_GPU);
    expect(await kindsIn(smi, "auto", [0, 1, 2], { CUDA_VISIBLE_DEVICES: "2,3,0" })).toEqual(["0-1 nvlink"]);
  });
});

describe("launch config", () => {
  test("each worker of --gpus 0,0 gets its same-device partner and the partner's device", async () => {
    const t = await resolveTopology("none", [0, 0], quiet);
    const source = {
      transfers: resolveTransferOptions({ mode: "force" }),
      pairs: t.pairs.map(([a, b]) => [a, b] as [number, number]),
      gpus: [0, 0],
      startTimeoutMs: 1000,
    };
    expect(workerDataPath(source, 0)).toMatchObject({ mode: "auto", peers: [{ rank: 1, gpu: 0 }] });
    expect(workerDataPath(source, 1)).toMatchObject({ mode: "auto", peers: [{ rank: 0, gpu: 0 }] });
  });
});
