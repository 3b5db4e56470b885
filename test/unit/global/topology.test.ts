// NVLink topology: explicit pairs and `nvidia-smi topo -m` captures (only NV# links count),
// remapped to logical ids after CUDA_VISIBLE_DEVICES.
import { expect, test } from "bun:test";
import { NvlinkTopology, parseNvidiaSmiTopo } from "../../../lib/global/topology.ts";

// Two RTX 3090s joined by an NVLink bridge.
const TWO_GPU = `	GPU0	GPU1	CPU Affinity	NUMA Affinity	GPU NUMA ID
GPU0	 X 	NV4	0-31	0		N/A
GPU1	NV4	 X 	0-31	0		N/A

Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
`;

// Four GPUs as two bridged pairs on two sockets, with a NIC.
const FOUR_GPU = `\x1b[4mGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m
GPU0\t X \tNV4\tSYS\tSYS\tPIX\t0-15,32-47\t0\t\tN/A
GPU1\tNV4\t X \tSYS\tSYS\tPIX\t0-15,32-47\t0\t\tN/A
GPU2\tSYS\tSYS\t X \tNV4\tSYS\t16-31,48-63\t1\t\tN/A
GPU3\tSYS\tSYS\tNV4\t X \tSYS\t16-31,48-63\t1\t\tN/A
NIC0\tPIX\tPIX\tSYS\tSYS\t X \t\t\t\t

Legend:

  X    = Self
  NV#  = Connection traversing a bonded set of # NVLinks

NIC Legend:

  NIC0: mlx5_0
`;

// HGX H200: every pair on NVSwitch (NV18), NICs on PIX/NODE/SYS.
const EIGHT_GPU_HGX = [
  "\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID",
  ...Array.from(
    { length: 8 },
    (_, i) =>
      [
        `GPU${i}`,
        ...Array.from({ length: 8 }, (_, j) => (i === j ? " X " : "NV18")),
        i < 4 ? "PIX" : "SYS",
        i < 4 ? "NODE" : "SYS",
        i < 4 ? "0-47,96-143" : "48-95,144-191",
        i < 4 ? "0" : "1",
        "",
        "N/A",
      ].join("\t"),
  ),
  "NIC0\tPIX\tPIX\tPIX\tPIX\tSYS\tSYS\tSYS\tSYS\t X \tNODE",
  "NIC1\tNODE\tNODE\tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\tNODE\t X ",
  "",
  "Legend:",
  "  X    = Self",
].join("\n");

// Eight PCIe A100s with NVLink bridges on pairs (0,1) (2,3) (4,5) (6,7); everything else PCIe.
const EIGHT_GPU_BRIDGED = (() => {
  const rel = (
    i: number,
    j: number,
  ) => (i === j
    ? " X "
    : (i ^ 1) === j
    ? "NV12"
    : Math.floor(i / 4) === Math.floor(j / 4)
    ? (Math.floor(i / 2) === Math.floor(j / 2) ? "PIX" : "NODE")
    : "SYS");
  const head = "\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID";
  const rows = Array.from(
    { length: 8 },
    (_, i) =>
      [
        `GPU${i}`,
        ...Array.from({ length: 8 }, (_, j) => rel(i, j)),
        i < 4 ? "0-31" : "32-63",
        i < 4 ? "0" : "1",
        "",
        "N/A",
      ].join("\t"),
  );
  return [head, ...rows, "", "Legend:"].join("\n");
})();

// Four PCIe GPUs, no NVLink at all.
const FOUR_GPU_PCIE = `	GPU0	GPU1	GPU2	GPU3	CPU Affinity	NUMA Affinity
GPU0	 X 	PIX	NODE	SYS	0-23	0
GPU1	PIX	 X 	NODE	SYS	0-23	0
GPU2	NODE	NODE	 X 	SYS	0-23	0
GPU3	SYS	SYS	SYS	 X 	24-47	1
`;

test("two bridged GPUs form one pair", () => {
  expect(parseNvidiaSmiTopo(TWO_GPU)).toEqual({ gpuCount: 2, pairs: [[0, 1]] });
  const t = NvlinkTopology.fromNvidiaSmi(TWO_GPU);
  expect(t.partners(0)).toEqual([1]);
  expect(t.affinity(0, 1)).toBe(1);
  expect(t.affinity(1, 1)).toBe(2);
});

test("four GPUs keep only the NV4 pairs, ignoring SYS, PIX and the NIC (coloured header)", () => {
  const t = NvlinkTopology.fromNvidiaSmi(FOUR_GPU);
  expect(t.pairs).toEqual([[0, 1], [2, 3]]);
  expect(t.partners(2)).toEqual([3]);
  expect(t.affinity(0, 2)).toBe(0);
});

test("an HGX 8-GPU box is fully connected", () => {
  const t = NvlinkTopology.fromNvidiaSmi(EIGHT_GPU_HGX);
  expect(t.worldSize).toBe(8);
  expect(t.pairs.length).toBe(28);
  expect(t.partners(5)).toEqual([0, 1, 2, 3, 4, 6, 7]);
});

test("eight bridged PCIe GPUs keep four pairs, not PIX/NODE/SYS neighbours", () => {
  const t = NvlinkTopology.fromNvidiaSmi(EIGHT_GPU_BRIDGED);
  expect(t.pairs).toEqual([[0, 1], [2, 3], [4, 5], [6, 7]]);
});

test("a PCIe-only machine has no pairs", () => {
  const t = NvlinkTopology.fromNvidiaSmi(FOUR_GPU_PCIE);
  expect(t.worldSize).toBe(4);
  expect(t.pairs).toEqual([]);
  expect(t.partners(0)).toEqual([]);
});

test("CUDA_VISIBLE_DEVICES remaps physical to logical ids and drops hidden GPUs", () => {
  expect(NvlinkTopology.fromNvidiaSmi(FOUR_GPU, "3,2").pairs).toEqual([[0, 1]]);
  const t = NvlinkTopology.fromNvidiaSmi(FOUR_GPU, "1,2,0");
  expect(t.worldSize).toBe(3);
  expect(t.pairs).toEqual([[0, 2]]); // physical 1-0 -> logical 0-2; 2 has lost its partner
  expect(NvlinkTopology.fromNvidiaSmi(EIGHT_GPU_BRIDGED, "6,7,0").pairs).toEqual([[0, 1]]);
  expect(() => NvlinkTopology.fromNvidiaSmi(FOUR_GPU, "GPU-8d3f")).toThrow(/GPU-8d3f.*explicit NVLink pairs/);
});

test("explicit pairs parse and validate", () => {
  expect(NvlinkTopology.fromPairs("0-1, 3-2", 4).pairs).toEqual([[0, 1], [2, 3]]);
  expect(NvlinkTopology.fromPairs("", 2).pairs).toEqual([]);
  expect(() => NvlinkTopology.fromPairs("0-4", 4)).toThrow(/rank 4, outside 0..3/);
  expect(() => NvlinkTopology.fromPairs("0:1", 2)).toThrow(/"0:1"/);
  expect(() => NvlinkTopology.fromPairs("1-1", 2)).toThrow(/itself/);
});

test("text that is not a topo matrix is rejected", () => {
  expect(() => parseNvidiaSmiTopo("No devices were found")).toThrow(RangeError);
});
