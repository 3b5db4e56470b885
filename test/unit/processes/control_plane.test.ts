// The control-plane server in-process over real Unix sockets: hello/ready, snapshots and deltas
// from workers, routes for the launcher, snapshot requests after a gap, dead ranks, launcher loss.
import { afterEach, expect, test } from "bun:test";
import { ControlPlane } from "../../../lib/processes/control_plane.ts";
import { Connection } from "../../../lib/protocol/connection.ts";
import type { Message } from "../../../lib/protocol/messages.ts";
import { RemoteError } from "../../../lib/protocol/protocol_errors.ts";
import { connectUnix, tempSocketPath } from "../../../lib/runtime/unix_socket.ts";
import { chainEntries, hashesOf, IDLE, promptTokens, snapshot } from "../global/page_table_fixture.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const quiet = () => {};
async function start(onLauncherGone?: (r: string) => void) {
  const plane = await ControlPlane.listen({
    socketPath: tempSocketPath("cp"),
    epoch: 1,
    pid: 1,
    heartbeat: false,
    log: quiet,
    onLauncherGone,
  });
  cleanups.push(() => plane.close());
  return plane;
}
async function client(plane: ControlPlane, name: string) {
  const c = new Connection(await connectUnix(plane.socketPath), { name, heartbeat: false, log: quiet });
  cleanups.push(() => c.close());
  return c;
}
const until = async (cond: () => boolean) => {
  for (let i = 0; i < 200 && !cond(); i++) await new Promise((r) => setTimeout(r, 5));
  expect(cond()).toBe(true);
};

const doc = promptTokens(3, 320);

test("routes follow the snapshots workers send; a delta gap triggers a snapshot request", async () => {
  const plane = await start();
  const launcher = await client(plane, "launcher");
  expect((await launcher.request({ type: "hello", role: "launcher", epoch: 1, pid: 10 }, { expect: ["ready"] })).role)
    .toBe("control");
  const workers = await Promise.all([0, 1].map((r) => client(plane, `w${r}`)));
  const fromControl: Message[] = [];
  workers[1]!.onMessage((m) => fromControl.push(m));
  workers.forEach((w, r) => w.send({ type: "hello", role: "worker", rank: r, epoch: 1, pid: 20 + r }));
  workers[0]!.send({ type: "block_snapshot", snapshot: snapshot(0) });
  workers[1]!.send({ type: "block_snapshot", snapshot: snapshot(1, { entries: chainEntries(hashesOf(doc)) }) });
  await until(() => plane.scheduler.blocks.healthyRanks().length === 2);
  const ask = (id: string) =>
    launcher.request({
      type: "route_query",
      requestId: id,
      blockHashes: hashesOf(doc),
      promptTokens: doc.length + 5,
      maxTokens: 8,
    }, { expect: ["route_result"] });
  expect(await ask("a")).toMatchObject({ rank: 1, reason: "prefix-hit", matchedBlocks: 20, feasible: true });
  // Rank 1 reports the request queued and allocated: its reservation ends.
  const cap = { numBlocks: 1000, blockSize: 16, numFree: 978, numReclaimable: 0 };
  workers[1]!.send({
    type: "block_delta",
    delta: {
      rank: 1,
      epoch: 1,
      baseVersion: 1,
      version: 2,
      capacity: cap,
      load: IDLE,
      added: [],
      removed: [],
      touched: [],
    },
    queued: ["a"],
    allocated: ["a"],
  });
  await until(() => plane.scheduler.reservations.size === 0);
  // A delta on a version the table does not hold: the worker is asked for a full snapshot once.
  workers[1]!.send({
    type: "block_delta",
    delta: {
      rank: 1,
      epoch: 1,
      baseVersion: 5,
      version: 6,
      capacity: cap,
      load: IDLE,
      added: [],
      removed: [],
      touched: [],
    },
  });
  workers[1]!.send({
    type: "block_delta",
    delta: {
      rank: 1,
      epoch: 1,
      baseVersion: 6,
      version: 7,
      capacity: cap,
      load: IDLE,
      added: [],
      removed: [],
      touched: [],
    },
  });
  await until(() => fromControl.length > 0);
  await new Promise((r) => setTimeout(r, 20));
  expect(fromControl.map((m) => m.type)).toEqual(["snapshot_request"]);
  const counters = (await launcher.request({ type: "stats_request" }, { expect: ["stats"] })).counters;
  expect(counters.rejected_base_mismatch).toBe(2);
  const table = await launcher.request({ type: "page_table_request" }, { expect: ["page_table"] });
  expect(table.snapshots.map((s) => [s.rank, s.entries.length])).toEqual([[0, 0], [1, 20]]);
});

test("a worker that disconnects leaves the page table; a rank with no worker cannot be routed to", async () => {
  const plane = await start();
  const launcher = await client(plane, "launcher");
  await launcher.request({ type: "hello", role: "launcher", epoch: 1, pid: 10 }, { expect: ["ready"] });
  const err = await launcher.request({
    type: "route_query",
    requestId: "x",
    blockHashes: [],
    promptTokens: 4,
    maxTokens: 1,
  }).catch((e) => e);
  expect((err as RemoteError).code).toBe("no_healthy_rank");
  const w = await client(plane, "w0");
  w.send({ type: "hello", role: "worker", rank: 0, epoch: 3, pid: 30 });
  w.send({ type: "block_snapshot", snapshot: snapshot(0, { epoch: 3, entries: chainEntries(hashesOf(doc)) }) });
  await until(() => plane.scheduler.blocks.isHealthy(0));
  w.close();
  await until(() => !plane.scheduler.blocks.isHealthy(0));
  // The same worker reconnects (it was alive): its snapshot is accepted again.
  const again = await client(plane, "w0b");
  again.send({ type: "hello", role: "worker", rank: 0, epoch: 3, pid: 30 });
  again.send({ type: "block_snapshot", snapshot: snapshot(0, { epoch: 3, entries: chainEntries(hashesOf(doc)) }) });
  await until(() => plane.scheduler.blocks.isHealthy(0));
  // The launcher says it died: epoch 3 is retired.
  launcher.send({ type: "rank_down", rank: 0, epoch: 3, reason: "exited" });
  await until(() => !plane.scheduler.blocks.isHealthy(0));
  again.send({ type: "block_snapshot", snapshot: snapshot(0, { epoch: 3, version: 9 }) });
  await new Promise((r) => setTimeout(r, 20));
  expect(plane.scheduler.blocks.isHealthy(0)).toBe(false);
});

test("messages before hello are refused, and the launcher's departure is reported", async () => {
  let gone = "";
  const plane = await start((r) => (gone = r));
  const c = await client(plane, "early");
  const err = await c.request({ type: "stats_request" }).catch((e) => e);
  expect((err as RemoteError).message).toContain("expected hello");
  await c.request({ type: "hello", role: "launcher", epoch: 1, pid: 1 }, { expect: ["ready"] });
  expect(plane.launcherCount).toBe(1);
  c.close();
  await until(() => gone !== "");
  expect(gone).toBe("closed by peer");
});
