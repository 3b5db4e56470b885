/**
 * Resolves the topology LLMEngine gives the control plane and the workers. NVLink pairs: explicit
 * rank pairs when the caller (or LMPOOL_NVLINK_PAIRS) names them, else `nvidia-smi topo -m` keeping
 * only NV# links between the ranks' devices, else none ("none", or no nvidia-smi). Same-device
 * pairs come on top of every one of those, "none" included: two ranks on one CUDA device copy KV
 * between them on that device (a device-local copy) with no link at all, so the NVLink setting has
 * nothing to say about them. Transfers between them are switched off with the transfer mode
 * ("off"), like every other transfer.
 * @module
 */
import { NvlinkTopology, type RankPair } from "../global/topology.ts";
import { readSetting } from "../runtime/env.ts";
import { spawnChild } from "../runtime/subprocess.ts";

/** How the caller states the NVLink pairs: "0-1,2-3", explicit pairs, "auto" (nvidia-smi) or "none". */
export type TopologyInput = string | readonly RankPair[] | NvlinkTopology;

/**
 * The logical topology of the ranks. `gpus` is the CUDA device of each rank (a count n means
 * ranks 0..n-1 on devices 0..n-1): ranks that share a device are same-device pairs, and "auto"
 * maps the NV# links between devices onto the ranks placed on them.
 */
export async function resolveTopology(
  input: TopologyInput | undefined,
  gpus: number | readonly number[],
  log: (line: string) => void,
): Promise<NvlinkTopology> {
  const devices = typeof gpus === "number" ? Array.from({ length: gpus }, (_, i) => i) : [...gpus];
  const worldSize = devices.length;
  const withDevices = (pairs: readonly RankPair[]) => new NvlinkTopology(worldSize, pairs, devices);
  if (input instanceof NvlinkTopology) {
    if (input.worldSize !== worldSize) {
      throw new RangeError(`topology is for ${input.worldSize} ranks, the engine has ${worldSize}`);
    }
    return withDevices(input.pairs);
  }
  if (Array.isArray(input)) return withDevices(input as RankPair[]);
  const setting = input === undefined ? (readSetting("LMPOOL_NVLINK_PAIRS") ?? "auto") : (input as string);
  if (setting === "none") return withDevices([]);
  if (Array.isArray(setting)) return withDevices(setting);
  if (setting !== "auto") return withDevices(NvlinkTopology.fromPairs(setting, worldSize).pairs);
  const smi = await nvidiaSmiTopo();
  if (smi === undefined) return withDevices([]);
  try {
    const full = NvlinkTopology.fromNvidiaSmi(smi, readSetting("CUDA_VISIBLE_DEVICES"));
    return withDevices(ranksOnLinkedDevices(devices, full.pairs));
  } catch (e) {
    log(`[lmpool] ignoring nvidia-smi topology: ${(e as Error).message}`);
    return withDevices([]);
  }
}

/** Every two ranks whose devices (`devices[rank]`, logical CUDA ids) are an NVLink pair of `links`. */
function ranksOnLinkedDevices(devices: readonly number[], links: readonly RankPair[]): RankPair[] {
  const linked = new Set(links.map(([a, b]) => `${Math.min(a, b)}-${Math.max(a, b)}`));
  const out: RankPair[] = [];
  for (let a = 0; a < devices.length; a++) {
    for (let b = a + 1; b < devices.length; b++) {
      const [x, y] = [devices[a]!, devices[b]!];
      if (linked.has(`${Math.min(x, y)}-${Math.max(x, y)}`)) out.push([a, b]);
    }
  }
  return out;
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
