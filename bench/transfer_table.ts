/**
 * Tables of `bun bench transfer`: the gather/scatter kernels against the measured HBM copy
 * bandwidth, each path against the raw link peak of the same run, and the issue-6 targets.
 * @module
 */
import { percentile } from "./stats/percentile.ts";
import {
  chooseDefaultPath,
  FULL_PATHS,
  RAW_PATHS,
  type TransferPairProfile,
  type TransferProfilePoint,
} from "./transfer_profile.ts";

/** Issue 6 targets (Qwen3-0.6B shape on 2 x H200). */
export const TARGETS = { oneBlockMs: 0.25, gbpsAt64: 317, peakFractionFrom32: 0.8 } as const;

const f = (x: number, d = 3) => (Number.isFinite(x) ? x.toFixed(d) : "-");
const pad = (cells: (string | number)[], widths: number[]) =>
  cells.map((c, i) => String(c).padStart(widths[i]!)).join(" ");
const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(bytes < 10 * 2 ** 20 ? 2 : 0);

/** Pack/unpack timings of one size. */
export interface KernelRow {
  blocks: number;
  bytes: number;
  pack: number[];
  unpack: number[];
}

/** Gather/scatter alone: payload GB/s and read+write traffic as a share of the measured copy bandwidth. */
export function printKernelTable(rows: KernelRow[], copyBytesPerS: number): void {
  console.log(`\ngather/scatter kernels alone (HBM copy ceiling ${(copyBytesPerS / 1e9).toFixed(0)} GB/s read+write)`);
  const w = [7, 8, 10, 9, 7, 10, 9, 7];
  console.log(pad(["blocks", "MiB", "pack ms", "GB/s", "%copy", "unpack ms", "GB/s", "%copy"], w));
  for (const r of rows) {
    const cells: (string | number)[] = [r.blocks, mib(r.bytes)];
    for (const ms of [percentile(r.pack, 50), percentile(r.unpack, 50)]) {
      const bps = r.bytes / (ms / 1e3);
      cells.push(f(ms), f(bps / 1e9, 1), `${f((100 * 2 * bps) / copyBytesPerS, 0)}%`);
    }
    console.log(pad(cells, w));
  }
}

/** The measured link peak at a size: the faster raw baseline. */
function peakAt(pair: TransferPairProfile, blocks: number): number {
  const raws = pair.paths.filter((c) => (RAW_PATHS as readonly string[]).includes(c.path));
  return Math.max(...raws.map((c) => c.points.find((p) => p.blocks === blocks)?.gbps ?? 0));
}

/** One table per path of a direction, with each size's ratio to the measured peak. */
export function printPathTables(pair: TransferPairProfile): void {
  console.log(`\n=== ${pair.srcDevice} -> ${pair.dstDevice} ===`);
  const w = [7, 7, 9, 9, 8, 10, 7, 6];
  for (const curve of pair.paths) {
    console.log(`\n${curve.path}`);
    console.log(pad(["blocks", "MiB", "p50 ms", "p95 ms", "GB/s", "peak GB/s", "%peak", "valid"], w));
    for (const p of curve.points) {
      const peak = peakAt(pair, p.blocks);
      const valid = p.validated === null ? "-" : p.validated ? "yes" : "NO";
      console.log(
        pad([
          p.blocks,
          mib(p.bytes),
          f(p.p50Ms),
          f(p.p95Ms),
          f(p.gbps, 1),
          f(peak, 1),
          `${f((100 * p.gbps) / peak, 0)}%`,
          valid,
        ], w),
      );
    }
  }
}

function verdict(ok: boolean | null): string {
  return ok === null ? "n/a " : ok ? "PASS" : "FAIL";
}

/** Targets per direction and full path, then the fastest path per size and the chosen default. */
export function printTargets(pairs: TransferPairProfile[]): void {
  console.log(
    `\ntargets: 1 block p50 <= ${TARGETS.oneBlockMs} ms | >= ${TARGETS.gbpsAt64} GB/s at 64 blocks | >= ${
      100 * TARGETS.peakFractionFrom32
    }% of peak from 32 blocks`,
  );
  for (const pair of pairs) {
    for (const curve of pair.paths.filter((c) => (FULL_PATHS as readonly string[]).includes(c.path))) {
      const at = (n: number): TransferProfilePoint | undefined => curve.points.find((p) => p.blocks === n);
      const one = at(1), sixtyFour = at(64);
      const big = curve.points.filter((p) => p.blocks >= 32);
      const worst = big.length ? Math.min(...big.map((p) => p.gbps / peakAt(pair, p.blocks))) : NaN;
      console.log(
        `  ${pair.srcDevice}->${pair.dstDevice} ${curve.path.padEnd(19)}` +
          ` ${verdict(one ? one.p50Ms <= TARGETS.oneBlockMs : null)} 1 block ${f(one?.p50Ms ?? NaN)} ms (p95 ${
            f(one?.p95Ms ?? NaN)
          })` +
          ` | ${verdict(sixtyFour ? sixtyFour.gbps >= TARGETS.gbpsAt64 : null)} 64 blocks ${
            f(sixtyFour?.gbps ?? NaN, 1)
          } GB/s` +
          ` | ${verdict(big.length ? worst >= TARGETS.peakFractionFrom32 : null)} worst >= 32 blocks ${
            f(100 * worst, 0)
          }% of peak`,
      );
    }
    const sizes = [...new Set(pair.paths.flatMap((c) => c.points.map((p) => p.blocks)))].sort((a, b) => a - b);
    const fastest = sizes.map((n) => {
      const best = pair.paths
        .filter((c) => (FULL_PATHS as readonly string[]).includes(c.path))
        .map((c) => ({ path: c.path, ms: c.points.find((p) => p.blocks === n)?.p95Ms ?? Infinity }))
        .sort((a, b) => a.ms - b.ms)[0];
      return `${n}:${best?.path ?? "-"}`;
    });
    console.log(`  ${pair.srcDevice}->${pair.dstDevice} fastest full path by p95: ${fastest.join(" ")}`);
  }
  console.log(`default path (cross-process capable, best geometric-mean p95 ratio): ${chooseDefaultPath(pairs)}`);
}
