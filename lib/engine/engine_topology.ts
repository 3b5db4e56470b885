/**
 * Resolves the NVLink topology LLMEngine gives the control plane: explicit pairs when the caller
 * (or LMPOOL_NVLINK_PAIRS) names them, else `nvidia-smi topo -m` keeping only NV# links, else none.
 * @module
 */
import { NvlinkTopology, type RankPair } from "../global/topology.ts";
import { readSetting } from "../runtime/env.ts";
import { spawnChild } from "../runtime/subprocess.ts";

/** How the caller states the topology: "0-1,2-3", explicit pairs, "auto" (nvidia-smi) or "none". */
export type TopologyInput = string | readonly RankPair[] | NvlinkTopology;

/** The logical topology for `worldSize` ranks. */
export async function resolveTopology(
  input: TopologyInput | undefined,
  worldSize: number,
  log: (line: string) => void,
): Promise<NvlinkTopology> {
  if (input instanceof NvlinkTopology) {
    if (input.worldSize !== worldSize) {
      throw new RangeError(`topology is for ${input.worldSize} ranks, the engine has ${worldSize}`);
    }
    return input;
  }
  if (Array.isArray(input)) return new NvlinkTopology(worldSize, input as RankPair[]);
  const setting = input === undefined ? (readSetting("LMPOOL_NVLINK_PAIRS") ?? "auto") : (input as string);
  if (setting === "none") return new NvlinkTopology(worldSize, []);
  if (Array.isArray(setting)) return new NvlinkTopology(worldSize, setting);
  if (setting !== "auto") return NvlinkTopology.fromPairs(setting, worldSize);
  const smi = await nvidiaSmiTopo();
  if (smi === undefined) return new NvlinkTopology(worldSize, []);
  try {
    const full = NvlinkTopology.fromNvidiaSmi(smi, readSetting("CUDA_VISIBLE_DEVICES"));
    // Workers are logical ranks 0..worldSize-1 of the visible GPUs.
    return new NvlinkTopology(worldSize, full.pairs.filter(([a, b]) => a < worldSize && b < worldSize));
  } catch (e) {
    log(`[lmpool] ignoring nvidia-smi topology: ${(e as Error).message}`);
    return new NvlinkTopology(worldSize, []);
  }
}

async function nvidiaSmiTopo(): Promise<string | undefined> {
  try {
    const child = spawnChild({ cmd: ["nvidia-smi", "topo", "-m"], stdout: "pipe", stderr: "ignore" });
    const [text, exit] = await Promise.all([new Response(child.stdout).text(), child.exited]);
    return exit.code === 0 ? text : undefined;
  } catch {
    return undefined; // no nvidia-smi on this machine
  }
}
