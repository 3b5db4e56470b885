// A fault at each transaction phase (refusal by either worker, a control-plane failure between
// phases, a hang that only the deadline ends, a control plane that vanishes) leaves both workers
// exactly as before the plan: same free/reclaimable counts, no pins, no reservations, the same
// published blocks and page table, and no leak. Each case runs over the host path and over the CUDA
// IPC path's logic, whose destination starts receiving at prepare.
import { afterEach, describe, expect, test } from "bun:test";
import type { CoordinatorPhase } from "../../../lib/transfer/control/transfer_coordinator.ts";
import type { TransferPhaseName, TransferRole } from "../../../lib/transfer/worker/transfer_executor.ts";
import {
  cachePrompt,
  candidateOf,
  type ClusterOptions,
  makeCluster,
  type TestCluster,
  tokens,
} from "./cluster_fixture.ts";

const clusters: TestCluster[] = [];
afterEach(async () => {
  for (const c of clusters.splice(0)) await c.close();
});

/** Both workers hold a cached chain; returns the cluster, the chain on rank 0 and the state before. */
async function setUp(o: ClusterOptions) {
  const c = await makeCluster(o);
  clusters.push(c);
  const hashes = cachePrompt(c.workers[0]!, tokens(21), 1);
  cachePrompt(c.workers[1]!, tokens(13, 7000), 2);
  c.report();
  const before = [0, 1].map((r) => ({ state: c.state(r), table: c.tableEntries(r) }));
  return { c, hashes, before };
}

function expectUnchanged(c: TestCluster, before: { state: unknown; table: string[] }[]): void {
  c.report();
  for (const r of [0, 1]) {
    expect(c.state(r)).toEqual(before[r]!.state as ReturnType<TestCluster["state"]>);
    expect(c.tableEntries(r)).toEqual(before[r]!.table);
    c.workers[r]!.bm.checkInvariants({ drained: true });
    expect(c.workers[r]!.executor.openPlans).toBe(0);
  }
  expect(c.table.isInFlight(0, c.tableEntries(0)[0]!.slice(0, 32))).toBe(false);
}

const WORKER_FAULTS: [TransferPhaseName, TransferRole][] = [
  ["prepare", "src"],
  ["prepare", "dst"],
  ["execute", "src"],
  ["execute", "dst"],
  ["publish", "dst"],
  ["finalize", "src"],
];

for (const path of ["host", "ipc"] as const) {
  describe(`over the ${path} path`, () => {
    describe("a worker refuses at a phase", () => {
      for (const mode of ["copy", "move"] as const) {
        for (const [phase, role] of WORKER_FAULTS) {
          test(`${mode}: ${phase} fails on the ${role === "src" ? "source" : "destination"}`, async () => {
            const target = role === "src" ? 0 : 1;
            const { c, hashes, before } = await setUp({
              dataPath: path,
              faults: (
                rank,
              ) => (rank === target ? (p, r) => (p === phase && r === role ? "fail" : undefined) : undefined),
            });
            const out = await c.coordinator.start(candidateOf(c, 0, 1, hashes, mode), 2000).done;
            expect(out.status).toBe("aborted");
            expect(out.failedPhase).toBe(phase as CoordinatorPhase);
            expect(out.reason).toMatch(new RegExp(`injected fault at ${phase} on rank ${target}`));
            expectUnchanged(c, before);
            expect(c.coordinator.counters()).toMatchObject({ transfer_aborted: 1, [`transfer_abort_${phase}`]: 1 });
          });
        }
      }
    });

    describe("a destination holding the chain's parent", () => {
      for (const phase of ["execute", "publish"] as const) {
        test(`${phase} fails on the destination: the parent it kept is released`, async () => {
          const c = await makeCluster({
            dataPath: path,
            faults: (rank) => (rank === 1 ? (p, r) => (p === phase && r === "dst" ? "fail" : undefined) : undefined),
          });
          clusters.push(c);
          const hashes = cachePrompt(c.workers[0]!, tokens(13), 1);
          cachePrompt(c.workers[1]!, tokens(5), 2); // the parent of the two blocks moved
          c.report();
          const before = [0, 1].map((r) => ({ state: c.state(r), table: c.tableEntries(r) }));
          const out = await c.coordinator.start(candidateOf(c, 0, 1, hashes.slice(1), "move"), 2000).done;
          expect(out).toMatchObject({ status: "aborted", failedPhase: phase });
          expectUnchanged(c, before);
        });
      }
    });

    describe("the control plane fails between phases", () => {
      for (const phase of ["prepare", "execute", "publish", "finalize"] as const) {
        test(`before ${phase}`, async () => {
          const { c, hashes, before } = await setUp({
            dataPath: path,
            beforePhase: (_p, ph) => {
              if (ph === phase) throw new Error(`control plane fault before ${ph}`);
            },
          });
          const out = await c.coordinator.start(candidateOf(c, 0, 1, hashes, "move"), 2000).done;
          expect(out).toMatchObject({ status: "aborted", failedPhase: phase });
          expectUnchanged(c, before);
        });
      }
    });

    test("a destination finalize failure after the source committed keeps the copy (nothing to undo)", async () => {
      const { c, hashes } = await setUp({
        dataPath: path,
        faults: (rank) => (rank === 1 ? (p) => (p === "finalize" ? "fail" : undefined) : undefined),
      });
      const out = await c.coordinator.start(candidateOf(c, 0, 1, hashes), 2000).done;
      expect(out.status).toBe("completed");
      expect(hashes.every((h) => c.workers[1]!.bm.cachedBlockOf(h) !== undefined)).toBe(true);
      for (const w of c.workers) w.bm.checkInvariants({ drained: true });
    });

    describe("a hang ends at the plan's deadline", () => {
      for (
        const [phase, role] of [["prepare", "dst"], ["execute", "dst"], ["execute", "src"], ["publish", "dst"]] as const
      ) {
        test(`${phase} hangs on the ${role}`, async () => {
          const target = role === "src" ? 0 : 1;
          const { c, hashes, before } = await setUp({
            dataPath: path,
            faults: (
              rank,
            ) => (rank === target ? (p, r) => (p === phase && r === role ? "hang" : undefined) : undefined),
          });
          const t0 = Date.now();
          const out = await c.coordinator.start(candidateOf(c, 0, 1, hashes), 150).done;
          expect(Date.now() - t0).toBeGreaterThanOrEqual(140);
          expect(out).toMatchObject({ status: "aborted", failedPhase: phase });
          expect(out.reason).toMatch(/deadline/);
          expectUnchanged(c, before);
          expect(c.coordinator.counters().transfer_deadline_aborts).toBe(1);
        });
      }
    });

    test("a vanished control plane: each worker aborts its side at the deadline", async () => {
      // The link loses every message after prepare: no execute, no abort ever arrives.
      const { c, hashes, before } = await setUp({
        dataPath: path,
        silent: (_rank, m) => m.type !== "transfer_prepare",
      });
      const out = c.coordinator.start(candidateOf(c, 0, 1, hashes), 120).done;
      await new Promise((r) => setTimeout(r, 40));
      expect(c.state(1).reserved).toBe(hashes.length);
      expect(c.state(0).pins).toBe(hashes.length);
      expect((await out).status).toBe("aborted");
      await new Promise((r) => setTimeout(r, 300)); // the workers' grace after the deadline
      expectUnchanged(c, before);
      expect(c.workers.map((w) => w.executor.counters.deadlineAborts)).toEqual([1, 1]);
    });
  });
}
